import { describe, expect, it } from 'vitest';
import { finishRun, startRun, type FinishInput } from '../../../src/controller/finish-run.js';
import { deriveConditions, withHealth } from '../../../src/controller/health.js';
import { StatusBoard } from '../../../src/controller/status-board.js';
import type { ControllerStatus, ResourceStatus } from '../../../src/controller/status.js';
import type { RunOutcome } from '../../../src/controller/summarise.js';
import { controllerInfo } from './fixtures.js';

/** The end of a run: the run record, metrics and log line from typed results, and the conditions that follow (pure). */

const T0 = Date.UTC(2026, 0, 1);
const row = (state: ResourceStatus['state']): ResourceStatus => ({
  kind: 'user',
  yaml_kind: 'User',
  project: null,
  name: 'dana',
  id: null,
  action: 'create',
  state,
  detail: null,
});

function finish(outcome: RunOutcome, o: Partial<FinishInput> & { trigger?: string; status?: ControllerStatus } = {}) {
  const board = new StatusBoard(controllerInfo(), () => ({ suspended: false, ready: true, leader: true, running: false }));
  const status = o.status ?? board.current;
  const start = o.start ?? startRun(status, o.trigger ?? 'interval', T0);
  return finishRun({ start, outcome, revision: 'abc123', status, finishedAt: T0 + 1_500, previous: undefined, ...o });
}

const converged: RunOutcome = { result: 'converged', errors: [], summary: { create: 1 } };

describe('finishRun', () => {
  it('records the run (last_run, recent_runs first, runs + 1), its metrics and its log line', () => {
    const run = finish(converged, { trigger: 'start' });
    expect(run.status.last_run).toEqual({
      trigger: 'start',
      started_at: '2026-01-01T00:00:00.000Z',
      finished_at: '2026-01-01T00:00:01.500Z',
      duration_ms: 1_500,
      result: 'converged',
      revision: 'abc123',
      summary: { create: 1 },
      errors: [],
      warnings: [],
    });
    expect(run.status.runs).toBe(1);
    expect(run.status.recent_runs[0]).toMatchObject({ result: 'converged', error_count: 0, first_error: null });
    expect(run.metrics).toEqual({ result: 'converged', seconds: 1.5 });
    expect(run.log).toEqual({
      level: 'info',
      fields: { trigger: 'start', revision: 'abc123', result: 'converged', duration_ms: 1_500, summary: { create: 1 } },
      message: 'reconcile run',
    });
  });

  it('the same outcome again at an interval, with nothing applied, is logged at debug; anything new or asked for is info', () => {
    const first = finish(converged);
    expect(first.log.level).toBe('info');
    expect(finish(converged, { previous: first.outcomeKey }).log.level).toBe('debug');
    expect(finish(converged, { previous: first.outcomeKey, trigger: 'webhook (push)' }).log.level).toBe('info');
    expect(finish({ ...converged, result: 'incomplete', errors: ['x'] }, { previous: first.outcomeKey }).log.level).toBe('info');
    expect(finish(converged, { previous: first.outcomeKey, revision: 'def456' }).log.level).toBe('info');
  });

  it("the plan's warnings go on the run record and follow its log line when the run is news; the same again is quiet", () => {
    const warned = { ...converged, warnings: ['Project hr is not pruned: ...'] };
    const first = finish(warned);
    expect(first.status.last_run.warnings).toEqual(['Project hr is not pruned: ...']);
    expect(first.status.recent_runs[0]).toMatchObject({ warning_count: 1 });
    expect(first.status.recent_runs[0]).not.toHaveProperty('warnings');
    expect(first.log).toMatchObject({ level: 'info', warnings: ['Project hr is not pruned: ...'] });
    const again = finish(warned, { previous: first.outcomeKey });
    expect(again.log.level).toBe('debug');
    expect(again.log.warnings).toBeUndefined();
    // A warning that appears, or goes, is news.
    expect(finish(warned, { previous: finish(converged).outcomeKey }).log.level).toBe('info');
    expect(finish(converged, { previous: first.outcomeKey }).log.level).toBe('info');
  });

  it('a run that wrote rows with a change applied or failed is info, even with the same outcome', () => {
    const board = new StatusBoard(controllerInfo(), () => ({ suspended: false, ready: true, leader: true, running: false }));
    const start = startRun(board.current, 'interval', T0);
    const key = finish(converged).outcomeKey;
    board.record({ resources: [row('applied')] });
    expect(finish(converged, { start, status: board.current, previous: key }).log.level).toBe('info');
    // The same rows as before the run (not rewritten): nothing was done by this run.
    const again = startRun(board.current, 'interval', T0);
    expect(finish(converged, { start: again, status: board.current, previous: key }).log.level).toBe('debug');
  });

  it('the conditions follow from the run it records: Ready, Stalled with the first error, Reconciling while progressing', () => {
    const conditions = (outcome: RunOutcome) => {
      const board = new StatusBoard(controllerInfo(), () => ({ suspended: false, ready: true, leader: true, running: false }));
      board.record(finish(outcome, { status: board.current }).status);
      return Object.fromEntries(deriveConditions(board.current, false).map((c) => [c.type, [c.status, c.reason, c.message]]));
    };
    expect(conditions(converged)).toEqual({
      Ready: ['True', 'Succeeded', 'revision abc123 applied and healthy'],
      Reconciling: ['False', 'Idle', ''],
      Stalled: ['False', 'None', ''],
    });
    expect(conditions({ result: 'plan-error', errors: ['missing project'], summary: {} })).toEqual({
      Ready: ['False', 'PlanFailed', 'missing project'],
      Reconciling: ['False', 'Idle', ''],
      Stalled: ['True', 'PlanFailed', 'missing project'],
    });
    expect(conditions({ result: 'progressing', errors: ['User dana: progressing: provisioning'], summary: {} })).toMatchObject({
      Ready: ['False', 'Progressing', 'User dana: progressing: provisioning'],
      Reconciling: ['True', 'Progressing', 'User dana: progressing: provisioning'],
    });
  });

  it('a healthy resource that has never run is marked on its row, and Ready says how many there are', () => {
    const board = new StatusBoard(controllerInfo(), () => ({ suspended: false, ready: true, leader: true, running: false }));
    const untested = withHealth(row('applied'), { health: 'healthy', neverRun: true });
    const proven = withHealth(row('in-sync'), { health: 'healthy' });
    expect(untested).toMatchObject({ state: 'applied', health: 'healthy', never_run: true, health_reason: expect.stringMatching(/^never run \(untested\)/) });
    expect(proven).toMatchObject({ health: 'healthy', health_reason: null });
    expect(proven.never_run).toBeUndefined();
    board.record({ resources: [untested, proven] });
    board.record(finish(converged, { status: board.current }).status);
    const ready = deriveConditions(board.current, false).find((c) => c.type === 'Ready')!;
    expect([ready.status, ready.message]).toEqual(['True', 'revision abc123 applied and healthy; 1 never run (untested)']);
  });
});

describe('StatusBoard', () => {
  it('keeps what a patch leaves out (rows keep their identity), merges revision fields, derives live fields on read', () => {
    let live = { suspended: false, ready: false, leader: false, running: true };
    const board = new StatusBoard(controllerInfo(), () => live);
    const rows = [row('applied')];
    board.record({ resources: rows, revision: { fetch_error: 'x' } });
    board.record({ revision: { last_fetch_at: 'now' } });
    expect(board.current.resources).toBe(rows);
    expect(board.current.revision).toMatchObject({ fetch_error: 'x', last_fetch_at: 'now', applied: null });
    expect(board.snapshot().conditions.find((c) => c.type === 'Reconciling')?.status).toBe('True');
    live = { suspended: true, ready: true, leader: true, running: false };
    const s = board.snapshot();
    expect([s.controller.suspended, s.controller.ready, s.controller.leader.elected]).toEqual([true, true, true]);
    expect(s.conditions.find((c) => c.type === 'Ready')?.reason).toBe('Suspended');
  });

  it('tells its listeners when told the status changed', () => {
    const board = new StatusBoard(controllerInfo(), () => ({ suspended: false, ready: true, leader: true, running: false }));
    let told = 0;
    board.subscribe(() => told++);
    board.changed();
    expect(told).toBe(1);
  });
});
