import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { runtimeOf } from '../../../src/service/runtime/runtime.js';
import { schedulerOf } from '../../../src/service/runtime/scheduler.js';
import type { RunData } from '../../../src/service/runtime/runs.js';
import { newId } from '../../../src/service/ids.js';
import { countRowsRead } from '../../support/db-counters.js';
import type { Db } from '../../../src/service/store/db.js';

/**
 * Issue 18: a run_failed rule counts the resource's failed runs in its window. The count was a
 * JSON filter over the resource's whole run history (up to --run-history runs, a sync's run up to
 * 2 MB each), parsed on every failure. A resource's runs never overlap, so they end in the order
 * they started: the count now walks them newest first and stops at the first that ended before
 * the window.
 */
const MINUTE = 60_000;
const OLD_RUNS = 300;
/** Runs in the window besides the one that just failed: more than a page of the walk (20); every tenth succeeded. */
const RECENT = 27;
const succeeded = (i: number) => i % 10 === 5;
const RECENT_FAILED = Array.from({ length: RECENT }, (_, i) => i).filter((i) => !succeeded(i)).length;

describe('run_failed over a long run history', () => {
  const now = Date.parse('2026-03-01T10:00:00Z');
  let svc: TestService;
  let t: TestTenant;
  beforeAll(async () => {
    svc = await startTestService({ clock: () => now });
    t = await svc.tenant();
  });
  afterAll(() => svc?.close());

  it('counts the failures in the window across pages, reading the window and not the history', async () => {
    const project = await svc.project(t, 'flaky');
    const base = `/projects/${project.id}`;
    const connector = (
      await svc.ok(t, 'POST', `${base}/connectors`, { body: { name: 'flaky', connector_type: 'salesforce', selected_tables: ['Account'] } })
    ).id;
    const condition = { metric: 'run_failed', operator: 'gte', threshold: RECENT_FAILED + 1, window_minutes: 10 };
    const rule = (
      await svc.ok(t, 'POST', `${base}/alert-rules`, {
        body: { name: 'many failures', severity: 'warning', condition, target: { connector_id: connector } },
      })
    ).id;
    const { ctx } = svc.service;
    const tenantId = (await ctx.tenants.bySlug(t.slug))!.id;
    const run = (status: string, finishedMsAgo: number): RunData => {
      const id = newId('run');
      const at = new Date(now - finishedMsAgo).toISOString();
      return {
        id,
        project_id: project.id,
        run_type: 'connector_sync',
        resource_id: connector,
        status,
        trigger: 'manual',
        started_at: at,
        finished_at: at,
        error: status === 'failed' ? 'source gone' : null,
        tables: [],
      } as unknown as RunData;
    };
    const store = async (r: RunData) =>
      ctx.resources.insert({
        id: r.id,
        tenantId,
        projectId: project.id,
        kind: 'run',
        parentId: connector,
        name: r.id,
        data: r,
        secrets: null,
      });
    // Oldest first, as runs are created: failures two days ago (out of the window), then recent ones.
    for (let i = 0; i < OLD_RUNS; i++) await store(run('failed', 2 * 24 * 60 * MINUTE - i * MINUTE));
    for (let i = 0; i < RECENT; i++) await store(run(succeeded(i) ? 'succeeded' : 'failed', 9 * MINUTE - i * 10_000));
    const current = run('failed', 0);
    await store(current);

    const reads = countRowsRead(ctx.db as Db);
    await schedulerOf(runtimeOf(ctx)).alerting.evaluateRun(tenantId, current);
    const read = reads.rows;
    const alerts = (await svc.ok<{ data: { alert_rule_id: string; message: string }[] }>(t, 'GET', `${base}/alerts`)).data.filter(
      (a) => a.alert_rule_id === rule,
    );
    expect(alerts).toHaveLength(1);
    expect(alerts[0].message).toMatch(new RegExp(`\\(${RECENT_FAILED + 1} failed runs in 10 minutes, >= ${RECENT_FAILED + 1}\\)$`));
    // The window's runs, the first one before it and a page of slack; the rules and the connector besides.
    expect(read).toBeLessThan(RECENT + 20 + 20);
  }, 60_000);
});
