import { describe, expect, it } from 'vitest';
import { healthOf, kind, KINDS } from '../../../src/kinds/index.js';

describe("healthOf: health from the kind's x-health rule", () => {
  it.each([
    ['connector', { status: 'created' }, { health: 'healthy', neverRun: true }],
    ['connector', { status: 'active', last_error: null }, { health: 'healthy' }],
    // Changed after its last sync started: its current settings are untried, even when that sync
    // finished after the change (it ran with the old settings).
    [
      'connector',
      { status: 'active', last_sync_started_at: '2026-01-01T10:00:00.000Z', updated_at: '2026-01-01T10:00:00.001Z' },
      { health: 'healthy', changedSinceRun: true },
    ],
    [
      'connector',
      {
        status: 'active',
        last_sync_started_at: '2026-01-01T10:00:00Z',
        last_sync_at: '2026-01-01T10:05:00Z',
        updated_at: '2026-01-01T10:01:00Z',
      },
      { health: 'healthy', changedSinceRun: true },
    ],
    [
      'connector',
      { status: 'active', last_sync_started_at: '2026-01-01T10:00:00.000Z', updated_at: '2026-01-01T09:59:59Z' },
      { health: 'healthy' },
    ],
    [
      'connector',
      { status: 'error', last_sync_started_at: '2026-01-01T10:00:00Z', updated_at: '2026-01-02T00:00:00Z' },
      { health: 'degraded', reason: 'status is error' },
    ],
    ['connector', { status: 'syncing' }, { health: 'progressing', reason: 'status is syncing' }],
    [
      'connector',
      { status: 'error', last_error: 'connection refused' },
      { health: 'degraded', reason: 'status is error: connection refused' },
    ],
    ['connector', { status: 'error' }, { health: 'degraded', reason: 'status is error' }],
    ['connector', { status: 'paused' }, { health: 'suspended', reason: 'status is paused' }],
    ['connector', { status: 'hibernating' }, { health: 'unknown', reason: 'status is hibernating' }],
    ['infrastructure_resource', { status: 'pending' }, { health: 'progressing', reason: 'status is pending' }],
    ['infrastructure_resource', { status: 'provisioned' }, { health: 'healthy' }],
    [
      'infrastructure_resource',
      { status: 'failed', last_error: 'aws has no region "x"' },
      { health: 'degraded', reason: 'status is failed: aws has no region "x"' },
    ],
    ['pipeline', {}, { health: 'healthy' }],
    ['pipeline', { last_run_status: null }, { health: 'healthy' }],
    ['pipeline', { last_run_status: 'running', last_error: 'stale' }, { health: 'progressing', reason: 'last_run_status is running' }],
    [
      'dbt_project',
      { last_run_status: 'failed', last_error: '1 of 3 models failed' },
      { health: 'degraded', reason: 'last_run_status is failed: 1 of 3 models failed' },
    ],
    ['project', { name: 'p' }, { health: 'healthy' }],
  ])('%s %j -> %j', (k, object, expected) => {
    expect(healthOf(kind(k), object)).toEqual(expected);
  });

  it('every x-health rule names fields of its kind, and every state value of the field is classified', () => {
    const ruled = [...KINDS.values()].filter((d) => d.health);
    expect(ruled.map((d) => d.kind).sort()).toEqual(['connector', 'dbt_project', 'infrastructure_resource', 'pipeline']);
    for (const d of ruled) {
      const rule = d.health!;
      const props = d.schema.properties!;
      expect(props[rule.field], `${d.kind}.${rule.field}`).toBeDefined();
      if (rule.message) expect(props[rule.message], `${d.kind}.${rule.message}`).toBeDefined();
      if (rule.ranAt)
        expect([props[rule.ranAt]?.format, props.updated_at?.format], `${d.kind}.${rule.ranAt}`).toEqual(['date-time', 'date-time']);
      const classified = new Set([
        ...(rule.healthy ?? []),
        ...(rule.progressing ?? []),
        ...(rule.degraded ?? []),
        ...(rule.suspended ?? []),
      ]);
      for (const value of props[rule.field].enum ?? [])
        expect(classified.has(value as string | null), `${d.kind}: ${String(value)}`).toBe(true);
    }
  });
});
