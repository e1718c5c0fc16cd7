import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { runtimeOf } from '../../../src/service/runtime/runtime.js';
import { schedulerOf } from '../../../src/service/runtime/scheduler.js';
import type { RunData } from '../../../src/service/runtime/runs.js';
import { newId } from '../../../src/service/ids.js';
import { countRowsRead } from '../../support/db-counters.js';
import { bulkInsert, RESOURCE_COLUMNS } from '../../support/bulk.js';
import type { Db } from '../../../src/service/store/db.js';

/**
 * Issue 18: every run that ends is checked against its project's alert rules, up to 5,000 of them.
 * Reading and parsing them all on every run end cost 12.4 ms of CPU each (SQLite); runs ending
 * within a moment of each other now share one read (runtime/rule-cache.ts), and a rule written
 * through the API still counts for the very next run end on this replica.
 */
const RULES = 2_000;
const RUN_ENDS = 20;

describe('alert rules at run end', () => {
  let svc: TestService;
  let t: TestTenant;
  beforeAll(async () => {
    svc = await startTestService();
    t = await svc.tenant();
  });
  afterAll(() => svc?.close());

  it('runs that end together read the project rules once; a rule created through the API counts at the next run end', async () => {
    const project = await svc.project(t, 'busy');
    const base = `/projects/${project.id}`;
    const connector = (
      await svc.ok(t, 'POST', `${base}/connectors`, {
        body: { name: 'orders', connector_type: 'salesforce', selected_tables: ['Account'] },
      })
    ).id;
    // RULES rules that never match (fewer than -1 rows), stored straight into the store.
    const template = await svc.ok(t, 'POST', `${base}/alert-rules`, {
      body: { name: 'never-0', severity: 'info', condition: { metric: 'rows_synced', operator: 'lt', threshold: -1 } },
    });
    const { ctx } = svc.service;
    const tenantId = (await ctx.tenants.bySlug(t.slug))!.id;
    const now = new Date().toISOString();
    await bulkInsert(ctx.db as Db, 'resources', RESOURCE_COLUMNS, RULES - 1, (n) => {
      const id = `alr_bulk${n}`;
      return [
        id,
        tenantId,
        project.id,
        'alert_rule',
        '',
        `never-${n + 1}`,
        JSON.stringify({ ...template, id, name: `never-${n + 1}` }),
        now,
        now,
      ];
    });
    const run = (): RunData =>
      ({
        id: newId('run'),
        project_id: project.id,
        run_type: 'connector_sync',
        resource_id: connector,
        status: 'succeeded',
        trigger: 'manual',
        started_at: now,
        finished_at: now,
        duration_seconds: 30,
        error: null,
        tables: [{ name: 'Account', rows: 5 }],
      }) as unknown as RunData;
    const alerting = schedulerOf(runtimeOf(ctx)).alerting;

    const reads = countRowsRead(ctx.db as Db);
    await Promise.all(Array.from({ length: RUN_ENDS / 2 }, () => alerting.evaluateRun(tenantId, run())));
    for (let i = 0; i < RUN_ENDS / 2; i++) await alerting.evaluateRun(tenantId, run());
    // One read of the rules (and the connector's name per run end), not RUN_ENDS of them.
    expect(reads.rows).toBeLessThan(RULES + 2 * RUN_ENDS);

    // Created through the API while the rules are in memory: the next run end fires it.
    const slow = (
      await svc.ok(t, 'POST', `${base}/alert-rules`, {
        body: {
          name: 'slow sync',
          severity: 'warning',
          condition: { metric: 'run_duration_seconds', operator: 'gte', threshold: 10 },
          target: { connector_id: connector },
        },
      })
    ).id;
    await alerting.evaluateRun(tenantId, run());
    const alerts = (await svc.ok<{ data: { alert_rule_id: string }[] }>(t, 'GET', `${base}/alerts`)).data;
    expect(alerts.filter((a) => a.alert_rule_id === slow)).toHaveLength(1);
    expect(alerts).toHaveLength(1);
  }, 120_000);
});
