import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, testStore, type TestService } from '../../support/service.js';
import { bulkInsert, RESOURCE_COLUMNS } from '../../support/bulk.js';
import { countRowsRead } from '../../support/db-counters.js';
import { freshnessRulesPageSql } from '../../../src/service/runtime/scheduler.js';
import { newId } from '../../../src/service/ids.js';
import type { Db } from '../../../src/service/store/db.js';

/**
 * Once a minute the scheduler looks at every freshness rule of every tenant. It found them by
 * walking every alert rule of every tenant (the resources_kind index) and filtering the JSON: a
 * tenant's 20,000 other rules were read, in one synchronous statement on SQLite, every minute,
 * whoever the freshness rules belonged to. A partial index (migration 11) holds only them.
 */
const OTHER_RULES = 20_000;

describe(`the freshness look beside ${OTHER_RULES.toLocaleString('en-US')} other alert rules`, () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService();
    const { db } = svc.service.ctx;
    const rule = (n: number, metric: string) => {
      const id = newId('alert_rule');
      const data = { id, name: `r${n}`, severity: 'warning', enabled: true, condition: { metric, operator: 'gt', threshold: 30 } };
      return [id, 'tnt_busy', 'prj_busy', 'alert_rule', '', `r${n}`, JSON.stringify(data), '2030-01-01T00:00:00Z', '2030-01-01T00:00:00Z'];
    };
    await bulkInsert(db, 'resources', RESOURCE_COLUMNS, OTHER_RULES, (n) => rule(n, 'run_failed'));
    await bulkInsert(db, 'resources', RESOURCE_COLUMNS, 3, (n) => rule(OTHER_RULES + n, 'freshness_minutes'));
    await db.run('ANALYZE');
  }, 60_000);
  afterAll(() => svc?.close());

  it('reads the freshness rules only, through their own index, on both stores', async () => {
    const { db } = svc.service.ctx;
    const sql = freshnessRulesPageSql(db.dialect);
    const counter = countRowsRead(db as Db);
    const rows = await db.all<{ data: string }>(sql, [0]);
    expect(rows.map((r) => JSON.parse(r.data).condition.metric)).toEqual(Array(3).fill('freshness_minutes'));
    expect(counter.rows).toBe(3);
    const statement = sql.replace('?', '0');
    if (testStore() === 'postgres') {
      const plan = (await db.all<{ 'QUERY PLAN': string }>(`EXPLAIN ${statement}`)).map((r) => r['QUERY PLAN']).join('\n');
      expect(plan, plan).toMatch(/Index Scan using resources_freshness_rules/);
      expect(plan, plan).not.toMatch(/Seq Scan/);
    } else {
      const plan = (await db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${statement}`)).map((r) => r.detail).join('\n');
      expect(plan, plan).toMatch(/USING INDEX resources_freshness_rules/);
    }
  });
});
