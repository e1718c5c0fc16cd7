import { describe, expect, it } from 'vitest';
import { NEVER_RUN_LISTED, renderPlanHealth, renderSettleMarkdown } from '../../../src/engine/settle-format.js';
import type { Plan, PlannedChange } from '../../../src/engine/index.js';
import type { HealthStatus } from '../../../src/kinds/index.js';

/** A connector's no-op change with the health a plan observed for it. */
const connector = (name: string, health?: HealthStatus): PlannedChange => ({
  action: 'no-op',
  kind: 'connector',
  yamlKind: 'Connector',
  project: 'shop',
  name,
  key: `Connector/shop/${name}`,
  changes: [],
  reasons: [],
  notes: [],
  ownership: 'owned',
  patchFields: [],
  health,
});

const plan = (changes: PlannedChange[]): Plan => ({
  sourceId: 'platform',
  changes,
  errors: [],
  warnings: [],
  managedCount: changes.length,
  summary: { create: 0, update: 0, replace: 0, delete: 0, 'no-op': changes.length, unsupported: 0 },
});

const NEVER_RUN: HealthStatus = { health: 'healthy', neverRun: true };

describe("the plan's health section", () => {
  it('says nothing when everything observed is healthy and has run', () => {
    expect(renderPlanHealth(plan([connector('a', { health: 'healthy' }), connector('b')]))).toBe('');
  });

  it('names what is not healthy, then what has never run (untested), with what tests it', () => {
    const text = renderPlanHealth(
      plan([
        connector('ok', { health: 'healthy' }),
        connector('fresh', NEVER_RUN),
        connector('broken', { health: 'degraded', reason: 'status is error: Host unreachable' }),
      ]),
    );
    expect(text).toBe(
      [
        'Health (as observed): 1 degraded, 1 never run (untested)',
        '  ! Connector shop/broken: degraded: status is error: Host unreachable',
        '  ? Connector shop/fresh: never run (untested)',
        '  never run: nothing has shown yet that it works; `dpctl apply --test-connections` tests the connection now, the first run does anyway.',
        '',
      ].join('\n'),
    );
  });

  it('lists the first never-run resources by name and counts the rest: 10,000 of them are 13 lines, not 10,000', () => {
    const many = Array.from({ length: 10_000 }, (_, i) => connector(`c${i}`, NEVER_RUN));
    const lines = renderPlanHealth(plan(many)).trimEnd().split('\n');
    expect(lines).toHaveLength(NEVER_RUN_LISTED + 3);
    expect(lines[0]).toBe('Health (as observed): 10,000 never run (untested)');
    expect(lines[1]).toBe('  ? Connector shop/c0: never run (untested)');
    expect(lines[NEVER_RUN_LISTED + 1]).toBe('  ? and 9,990 more never run (untested) (`--output json`: health[].never_run)');
    expect(lines[NEVER_RUN_LISTED + 2]).toMatch(/^ {2}never run: nothing has shown yet that they work;/);
  });

  it('in markdown (a pull request comment): the same section, never-run resources capped alike', () => {
    const md = renderSettleMarkdown(
      [],
      plan([
        connector('broken', { health: 'degraded', reason: 'status is error: Host unreachable' }),
        ...Array.from({ length: 12 }, (_, i) => connector(`c${i}`, NEVER_RUN)),
      ]),
    );
    const lines = md.trimEnd().split('\n');
    expect(lines.slice(0, 4)).toEqual([
      '',
      '#### Health (as observed): 1 degraded, 12 never run (untested)',
      '',
      '- ⚠️ Connector shop/broken: **degraded**: status is error: Host unreachable',
    ]);
    expect(lines[4]).toBe('- ❔ Connector shop/c0: never run (untested)');
    expect(lines[4 + NEVER_RUN_LISTED]).toBe('- _…and 2 more; run the command locally for all._');
    expect(lines.at(-1)).toMatch(/^_never run: nothing has shown yet that they work; `dpctl apply --test-connections` tests/);
  });
});
