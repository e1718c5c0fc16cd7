import { afterAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import type { DataPlatformClient } from '../../../src/client/index.js';
import type { ApplyResult, Plan, SettleResult } from '../../../src/engine/index.js';
import { Backoff } from '../../../src/controller/backoff.js';
import { RevisionReconciler, type EngineSteps, type ReconcilerDeps } from '../../../src/controller/reconcile-revision.js';
import { Revisions, validateRevision } from '../../../src/controller/revisions.js';
import type { ConfigSource, Revision } from '../../../src/controller/source/types.js';
import { StatusBoard } from '../../../src/controller/status-board.js';
import { change, controllerInfo, memoryLogger, planOf, prepared, problem, revisionOnDisk } from './fixtures.js';

/**
 * The steps of one run with fakes: a source that hands out the revisions it is given, engine
 * steps that return small plans and outcomes, no service. The status they record is a real StatusBoard.
 */

const dirs: string[] = [];
const onDisk = (id: string, valid = true) => {
  const rev = revisionOnDisk(id, valid);
  dirs.push(rev.root);
  return rev;
};
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** A source whose next fetch returns the last revision pushed (or throws the last error). */
class FakeSource implements ConfigSource {
  readonly description = 'fake';
  next: Revision | Error = new Error('nothing pushed');
  cleaned: string[][] = [];
  async fetch(): Promise<Revision> {
    if (this.next instanceof Error) throw this.next;
    return this.next;
  }
  async cleanup(keep: string[]) {
    this.cleaned.push(keep);
  }
}

const settled: SettleResult = { provisioning: [], tests: [], health: [], failures: [], checked: true };

function setup(o: { plan?: () => Plan; apply?: (plan: Plan) => ApplyResult; mode?: 'apply' | 'drift'; now?: () => number } = {}) {
  const source = new FakeSource();
  const log = memoryLogger();
  const counts = { fetchErrors: 0, invalidRevisions: 0 };
  const calls: string[] = [];
  const plan = o.plan ?? (() => planOf([change('dana', 'create')]));
  const steps: Partial<EngineSteps> = {
    preparePlan: async () => (calls.push('plan'), prepared(plan())),
    detectDrift: async () => (calls.push('drift'), { ...prepared(plan()), drift: [] }),
    previewProvisioning: async () => [],
    applyPlan: async (_client, p) => {
      calls.push(`apply ${p.changes.map((c) => c.name).join(',')}`);
      return o.apply?.(p) ?? { outcomes: p.changes.map((c) => ({ change: c, status: 'done' as const, id: `id-${c.name}` })), converged: true };
    },
    settle: async () => (calls.push('settle'), settled),
  };
  const deps: ReconcilerDeps = {
    source,
    client: {} as DataPlatformClient,
    mode: o.mode ?? 'apply',
    engine: { sourceId: 'platform' },
    backoff: new Backoff({ baseMs: 60_000 }),
    metrics: {
      fetchErrors: { inc: () => counts.fetchErrors++ },
      invalidRevisions: { inc: () => counts.invalidRevisions++ },
    } as unknown as ReconcilerDeps['metrics'],
    log,
    waitTimeoutMs: 1_000,
    steps,
    now: o.now,
  };
  const reconciler = new RevisionReconciler(deps);
  const board = new StatusBoard(controllerInfo(), () => ({ suspended: false, ready: true, leader: true, running: false }));
  const run = () => reconciler.run(new AbortController().signal, board);
  return { source, log, counts, calls, reconciler, board, run, deps };
}

describe('fetch and validate', () => {
  it('validateRevision gives file:line:column errors relative to the checkout; none for a valid revision', async () => {
    expect(await validateRevision(onDisk('ok'), { sourceId: 'platform' })).toEqual([]);
    const errors = await validateRevision(onDisk('bad', false), { sourceId: 'platform' });
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^users\.yaml:\d+:\d+: .*nope/);
  });

  it('Revisions: a new valid revision goes in force; the same one again is only a fetch; an invalid one keeps the last good', () => {
    let now = Date.UTC(2026, 0, 1);
    const revisions = new Revisions(() => now);
    const r1 = { id: 'r1', configDir: '/x', root: '/x', summary: 'first' };
    const first = revisions.see({ ok: true, rev: r1 });
    expect(first.seen.kind).toBe('new');
    expect(first.revision).toEqual({
      fetch_error: null,
      last_fetch_at: '2026-01-01T00:00:00.000Z',
      fetched: { id: 'r1', summary: 'first', at: '2026-01-01T00:00:00.000Z' },
    });
    expect(revisions.check(r1, []).checked).toEqual({ kind: 'valid', rev: r1, previous: undefined });
    now += 1_000;
    expect(revisions.see({ ok: true, rev: r1 })).toEqual({
      seen: { kind: 'unchanged', rev: r1 },
      revision: { fetch_error: null, last_fetch_at: '2026-01-01T00:00:01.000Z' },
    });
    const r2 = { ...r1, id: 'r2', summary: undefined };
    expect(revisions.see({ ok: true, rev: r2 }).seen.kind).toBe('new');
    expect(revisions.check(r2, ['e'])).toEqual({
      checked: { kind: 'invalid', rev: r2, errors: ['e'], inForce: r1 },
      revision: { invalid: { id: 'r2', summary: null, errors: ['e'] } },
    });
    expect(revisions.inForce).toBe(r1);
    expect(revisions.see({ ok: false, error: 'timeout' })).toEqual({ seen: { kind: 'fetch-failed', error: 'timeout' }, revision: { fetch_error: 'timeout' } });
  });
});

describe('one run over the revision in force', () => {
  it('without any revision: the fetch error is the run error, counted and logged; nothing is planned', async () => {
    const t = setup();
    t.source.next = new Error('could not resolve host');
    expect(await t.run()).toEqual({ result: 'error', errors: ['could not resolve host'], summary: {} });
    expect(t.counts.fetchErrors).toBe(1);
    expect(t.calls).toEqual([]);
    expect(t.reconciler.planned).toBe(false);
    expect(t.board.current.revision.fetch_error).toBe('could not resolve host');
    expect(t.log.lines.map((l) => l.message)).toEqual(['fetch failed: the revision in force stays']);
  });

  it('a source that stays unreachable is logged when it starts failing, when the error changes, every 10 minutes, and when it recovers', async () => {
    let now = Date.UTC(2026, 0, 1);
    const t = setup({ now: () => now });
    const runEvery = async (seconds: number, times: number) => {
      for (let i = 0; i < times; i++) {
        await t.run();
        now += seconds * 1000;
      }
    };
    t.source.next = new Error('could not resolve host');
    await runEvery(30, 20); // 10 minutes of failures, every one counted and on /status
    expect(t.counts.fetchErrors).toBe(20);
    expect(t.log.lines.map((l) => l.message)).toEqual(['fetch failed: the revision in force stays']);
    await runEvery(30, 1); // 10 minutes after the first line: again, saying how many were not logged
    expect(t.log.lines.at(-1)).toMatchObject({
      message: 'fetch failed: the revision in force stays',
      fields: { err: 'could not resolve host', not_logged_since_last: 19, failing_since: '2026-01-01T00:00:00.000Z' },
    });
    t.source.next = new Error('connection refused');
    await runEvery(30, 2); // a new error is logged at once, its repeat is not
    expect(t.log.lines.map((l) => l.fields.err)).toEqual(['could not resolve host', 'could not resolve host', 'connection refused']);
    t.source.next = onDisk('r1');
    await runEvery(30, 2);
    const recovered = t.log.lines.filter((l) => l.message === 'fetch recovered');
    expect(recovered).toHaveLength(1);
    expect(recovered[0].fields).toMatchObject({ failures: 23, failing_since: '2026-01-01T00:00:00.000Z' });
    expect(t.board.current.revision.fetch_error).toBeNull();
  });

  it('apply mode: plan, apply, check health, summarise; records the rows and the converged revision', async () => {
    const t = setup();
    t.source.next = onDisk('r1');
    const outcome = await t.run();
    expect(outcome.result).toBe('converged');
    expect(t.calls).toEqual(['plan', 'apply dana', 'settle']);
    expect(t.reconciler.planned).toBe(true);
    const s = t.board.current;
    expect(s.resources.map((r) => [r.name, r.state, r.id])).toEqual([['dana', 'applied', 'id-dana']]);
    expect(s.drift.map((d) => [d.name, d.type])).toEqual([['dana', 'deleted']]);
    expect([s.revision.applied?.id, s.revision.converged?.id, s.revision.invalid]).toEqual(['r1', 'r1', null]);
    expect(t.source.cleaned).toEqual([['r1']]);
  });

  it('a failed change backs off: the next run holds it back (and what needs it), a new revision tries it again at once', async () => {
    const t = setup({ apply: (p) => ({ outcomes: p.changes.map((c) => ({ change: c, status: 'failed' as const, message: 'HTTP 500' })), converged: false }) });
    t.source.next = onDisk('r1');
    const first = await t.run();
    expect(first).toMatchObject({ result: 'incomplete', errors: ['User dana: failed: HTTP 500'] });
    expect(t.board.current.resources[0]).toMatchObject({ state: 'failed', failures: 1 });
    expect(t.log.lines.find((l) => l.message === 'change failed: backing off')?.fields).toMatchObject({ resource: 'User dana', failures: 1 });

    const second = await t.run();
    expect(second.result).toBe('incomplete');
    expect(t.calls.filter((c) => c.startsWith('apply'))).toEqual(['apply dana']);
    expect(t.board.current.resources[0]).toMatchObject({ state: 'backoff', detail: 'backing off after 1 failure: HTTP 500', failures: 1 });

    t.source.next = onDisk('r2');
    await t.run();
    expect(t.calls.filter((c) => c.startsWith('apply'))).toEqual(['apply dana', 'apply dana']);
  });

  it('a plan with errors applies nothing: plan-error, every change pending', async () => {
    const t = setup({ plan: () => planOf([change('dana', 'create')], [problem('references a missing project', 'User dana')]) });
    t.source.next = onDisk('r1');
    expect(await t.run()).toMatchObject({
      result: 'plan-error',
      errors: ['User dana: references a missing project'],
      errorCodes: { unresolved_reference: 1 },
    });
    expect(t.calls).toEqual(['plan']);
    expect(t.board.current.resources.map((r) => r.state)).toEqual(['pending']);
    expect(t.reconciler.planned).toBe(true);
  });

  it('an invalid newest revision: the last good one is reconciled, and the run is `invalid` with the errors first', async () => {
    const t = setup();
    t.source.next = onDisk('good');
    expect((await t.run()).result).toBe('converged');
    t.source.next = onDisk('bad', false);
    const outcome = await t.run();
    expect(outcome.result).toBe('invalid');
    expect(outcome.errors[0]).toMatch(/^users\.yaml:\d+:\d+: /);
    expect(t.counts.invalidRevisions).toBe(1);
    expect(t.reconciler.revisions.inForce?.id).toBe('good');
    expect(t.board.current.revision.invalid?.id).toBe('bad');
    expect(t.source.cleaned.at(-1)).toEqual(['bad', 'good']);
  });

  it('drift mode: plans with drift detection and applies nothing; in sync is converged', async () => {
    const t = setup({ mode: 'drift', plan: () => planOf([change('dana', 'no-op')]) });
    t.source.next = onDisk('r1');
    expect((await t.run()).result).toBe('in-sync');
    expect(t.calls).toEqual(['drift']);
    expect(t.board.current.resources.map((r) => r.state)).toEqual(['in-sync']);
    expect(t.board.current.revision.converged?.id).toBe('r1');
  });

  it('a step that throws is the run error (logged); aborted, it is `stopped` (not logged)', async () => {
    const t = setup({
      plan: () => {
        throw new Error('HTTP 503 on GET /users');
      },
    });
    t.source.next = onDisk('r1');
    expect(await t.run()).toEqual({ result: 'error', errors: ['HTTP 503 on GET /users'], summary: {} });
    expect(t.log.lines.at(-1)).toMatchObject({ level: 'error', message: 'reconcile failed' });
    const abort = new AbortController();
    abort.abort();
    const lines = t.log.lines.length;
    expect((await t.reconciler.run(abort.signal, t.board)).result).toBe('stopped');
    expect(t.log.lines.slice(lines).filter((l) => l.message === 'reconcile failed')).toEqual([]);
  });
});
