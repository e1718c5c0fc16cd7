import { describe, expect, it } from 'vitest';
import { EngineConfigError, type HealthEntry, type Outcome, type PlannedChange } from '../../../src/engine/index.js';
import {
  applyOutcome,
  driftOutcome,
  driftRows,
  errorOutcome,
  heldRows,
  noRevisionOutcome,
  resourceRows,
  withInvalidRevision,
} from '../../../src/controller/summarise.js';
import type { ControllerStatus, ResourceStatus } from '../../../src/controller/status.js';
import { change, planOf, problem } from './fixtures.js';

/** The summarise step: rows of /status and the run's result, from a plan and what the apply did (pure, no service). */

describe('resource rows after an apply', () => {
  it('gives each change the state its outcome says: in sync, applied (with the new id), failed, skipped, unsupported, pending', () => {
    const changes = ['same', 'made', 'broken', 'later', 'odd', 'untried'].map((n, i) => change(n, i === 0 ? 'no-op' : 'create'));
    const outcome = (c: PlannedChange, status: Outcome['status'], extra: Partial<Outcome> = {}): [PlannedChange, Outcome] => [
      c,
      { change: c, status, ...extra },
    ];
    const outcomes = new Map([
      outcome(changes[1], 'done', { id: 'u-1' }),
      outcome(changes[2], 'failed', { message: 'HTTP 500' }),
      outcome(changes[3], 'skipped', { message: 'needs broken' }),
      outcome(changes[4], 'unsupported', { message: 'no such operation' }),
    ]);
    const backoffOf = (key: string) => (key === changes[2].key ? { failures: 2, nextAttemptAt: Date.UTC(2026, 0, 1), lastError: 'HTTP 500' } : undefined);
    const rows = resourceRows(planOf(changes), { outcomes, deferred: new Map() }, backoffOf);
    expect(rows.map((r) => [r.name, r.state, r.detail, r.id])).toEqual([
      ['same', 'in-sync', null, null],
      ['made', 'applied', 'create done', 'u-1'],
      ['broken', 'failed', 'HTTP 500', null],
      ['later', 'skipped', 'needs broken', null],
      ['odd', 'unsupported', 'no such operation', null],
      ['untried', 'pending', null, null],
    ]);
    expect(rows[2]).toMatchObject({ failures: 2, next_attempt_at: '2026-01-01T00:00:00.000Z' });
  });

  it('shows a held-back change as backing off (with its entry), and an observe-only one as drift, never applied', () => {
    const held = change('held', 'update');
    const watched = change('watched', 'update', { observeOnly: true });
    const entry = { failures: 1, nextAttemptAt: Date.UTC(2026, 0, 1, 0, 0, 5), lastError: 'boom' };
    const rows = resourceRows(
      planOf([held, watched]),
      { outcomes: new Map(), deferred: new Map([[held, 'backing off after 1 failure: boom']]) },
      (key) => (key === held.key ? entry : undefined),
    );
    expect(rows[0]).toMatchObject({ state: 'backoff', detail: 'backing off after 1 failure: boom', failures: 1 });
    expect(rows[1]).toMatchObject({ state: 'drifted', detail: 'observe only: role' });
  });

  it("puts each resource's health on its row: in sync or applied but degraded or progressing shows that instead", () => {
    const changes = [change('fine', 'no-op'), change('sick', 'no-op'), change('new', 'create'), change('broken', 'update'), change('plain', 'no-op')];
    const outcomes = new Map<PlannedChange, Outcome>([
      [changes[2], { change: changes[2], status: 'done', id: 'u-3' }],
      [changes[3], { change: changes[3], status: 'failed', message: 'HTTP 500' }],
    ]);
    const entry = (c: PlannedChange, health: HealthEntry['health'], reason?: string): HealthEntry => ({
      key: c.key,
      subject: `User ${c.name}`,
      kind: c.kind,
      name: c.name,
      health,
      reason,
    });
    const health = [
      entry(changes[0], 'healthy'),
      entry(changes[1], 'degraded', 'status is error: boom'),
      entry(changes[2], 'progressing', 'status is provisioning'),
      entry(changes[3], 'degraded', 'status is error: later'),
    ];
    const rows = resourceRows(planOf(changes), { outcomes, deferred: new Map() }, () => undefined, health);
    expect(rows.map((r) => [r.name, r.state, r.detail, r.health ?? '-', r.health_reason === undefined ? '-' : r.health_reason])).toEqual([
      ['fine', 'in-sync', null, 'healthy', null],
      ['sick', 'degraded', 'status is error: boom', 'degraded', 'status is error: boom'],
      ['new', 'progressing', 'status is provisioning', 'progressing', 'status is provisioning'],
      // A failed change stays failed: its health is shown beside it.
      ['broken', 'failed', 'HTTP 500', 'degraded', 'status is error: later'],
      // A kind without a health rule has no health entry, and its row no health fields.
      ['plain', 'in-sync', null, '-', '-'],
    ]);
    expect(Object.keys(rows[4])).toEqual(['kind', 'yaml_kind', 'project', 'name', 'id', 'action', 'state', 'detail']);
    expect(rows[2].id).toBe('u-3');
    // Drift mode: the health the plan observed.
    const observed = planOf([
      change('ok', 'no-op', { health: { health: 'healthy' } }),
      change('down', 'no-op', { health: { health: 'degraded', reason: 'status is error: boom' } }),
      change('gone', 'create'),
    ]);
    expect(driftRows(observed).map((r) => [r.name, r.state, r.health ?? '-'])).toEqual([
      ['ok', 'in-sync', 'healthy'],
      ['down', 'degraded', 'degraded'],
      ['gone', 'drifted', '-'],
    ]);
  });

  it('a plan with errors leaves every change pending; drift mode reports what differs as drifted', () => {
    const plan = planOf([change('a', 'no-op'), change('b', 'create')], [problem('bad reference')]);
    expect(heldRows(plan).map((r) => [r.state, r.detail])).toEqual([
      ['in-sync', null],
      ['pending', 'not applied: the plan has errors'],
    ]);
    expect(driftRows(plan).map((r) => [r.state, r.detail])).toEqual([
      ['in-sync', null],
      ['drifted', 'not on the server'],
    ]);
  });
});

describe("a run's outcome", () => {
  const row = (name: string, state: ResourceStatus['state'], detail: string | null = null): ResourceStatus => ({
    kind: 'user',
    yaml_kind: 'User',
    project: null,
    name,
    id: null,
    action: 'create',
    state,
    detail,
  });
  const plan = planOf([change('a', 'create')]);

  it('apply mode: converged when every row is done, incomplete with one line per row in trouble, degraded by health', () => {
    expect(applyOutcome([row('a', 'applied')], false, plan)).toEqual({
      result: 'converged',
      errors: [],
      warnings: [],
      summary: { create: 1, update: 0, replace: 0, delete: 0, no_op: 0, unsupported: 0 },
    });
    // The plan's warnings go with the outcome; they do not change the result.
    expect(applyOutcome([row('a', 'applied')], false, { ...plan, warnings: ['Project p is not pruned: ...'] })).toMatchObject({
      result: 'converged',
      warnings: ['Project p is not pruned: ...'],
    });
    const trouble = applyOutcome([row('a', 'failed', 'HTTP 500'), row('b', 'degraded', 'lag')], false, plan);
    expect(trouble.result).toBe('incomplete');
    expect(trouble.errors).toEqual(['User a: failed: HTTP 500', 'User b: degraded: lag']);
    expect(applyOutcome([row('b', 'degraded', 'lag')], false, plan).result).toBe('degraded');
    expect(applyOutcome([row('a', 'failed')], true, plan).result).toBe('stopped');
  });

  it('drift mode: plan errors first, then drift, else in sync', () => {
    expect(driftOutcome(planOf([], [problem('x')]), 1, []).result).toBe('plan-error');
    expect(driftOutcome(plan, 1, []).result).toBe('drift');
    expect(driftOutcome(plan, 0, [row('a', 'in-sync')]).result).toBe('in-sync');
  });

  it("an invalid newest revision is the run's result, its errors first, whatever the last good revision came to; not an error or a stop", () => {
    const invalid = { id: 'r2', summary: null, errors: ['users.yaml:7:3: nope'] };
    const converged = { result: 'converged' as const, errors: [], summary: {} };
    expect(withInvalidRevision(converged, invalid)).toEqual({ result: 'invalid', errors: ['users.yaml:7:3: nope'], summary: {} });
    // A connector in error (degraded) or a failed change (incomplete) of the revision in force no longer hides the broken commit.
    for (const result of ['degraded', 'progressing', 'incomplete', 'plan-error', 'drift'] as const)
      expect(withInvalidRevision({ ...converged, result, errors: ['e'] }, invalid), result).toMatchObject({
        result: 'invalid',
        errors: ['users.yaml:7:3: nope', 'e'],
      });
    for (const result of ['error', 'stopped'] as const)
      expect(withInvalidRevision({ ...converged, result, errors: ['e'] }, invalid).result, result).toBe(result);
    expect(withInvalidRevision(converged, null)).toBe(converged);
  });

  it('without a revision in force: invalid with its errors, else the fetch error', () => {
    const revision = { invalid: null, fetch_error: 'git: no such remote' } as ControllerStatus['revision'];
    expect(noRevisionOutcome(revision)).toEqual({ result: 'error', errors: ['git: no such remote'], summary: {} });
    expect(noRevisionOutcome({ ...revision, invalid: { id: 'r1', summary: null, errors: ['bad'] } }).result).toBe('invalid');
    expect(noRevisionOutcome({ ...revision, fetch_error: null }).errors).toEqual(['no revision yet']);
  });

  it('a thrown config error lists its errors; an abort is `stopped`', () => {
    const invalid = [
      { code: 'yaml_syntax' as const, file: 'a.yaml', line: 2, column: 1, message: 'YAML syntax: bad indentation' },
      { code: 'invalid_field' as const, file: 'b.yaml', line: 5, column: 3, subject: 'Connector/x', field: 'spec.port', message: 'must be integer' },
      { code: 'invalid_field' as const, file: 'b.yaml', line: 6, column: 3, subject: 'Connector/x', field: 'spec.host', message: 'is required' },
    ];
    expect(errorOutcome(new EngineConfigError(invalid), false)).toEqual({
      result: 'error',
      errors: ['a.yaml:2:1: YAML syntax: bad indentation', 'b.yaml:5:3: Connector/x: spec.port: must be integer', 'b.yaml:6:3: Connector/x: spec.host: is required'],
      errorCodes: { yaml_syntax: 1, invalid_field: 2 },
      summary: {},
    });
    expect(errorOutcome(new Error('socket hang up'), true)).toEqual({ result: 'stopped', errors: ['socket hang up'], summary: {} });
  });
});
