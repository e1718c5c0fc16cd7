import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { turnsDuring } from '../../support/event-loop.js';
import type { Db } from '../../../src/service/store/db.js';
import { countStatements } from '../../support/db-counters.js';
import { runtimeOf } from '../../../src/service/runtime/runtime.js';
import { startDbtRun } from '../../../src/service/runtime/dbt.js';
import { waitForRun, type Run } from './helpers.js';

/**
 * A dbt run checks each model's sources when the model builds. It read the connector again for
 * every source of every model, with nothing in between: 190 ephemeral models of 100 sources on one
 * 0.8 MB connector read it 19,000 times (27 s, the event loop held 200-300 ms at a time, every
 * other tenant waiting). Now a connector is read once per batch (the models that start at the
 * same moment of the run's simulated clock), and each model starts on a new turn of the loop.
 */
let svc: TestService;
let t: TestTenant;
let tenantId: string;
let projectId: string;
let base: string;

beforeAll(async () => {
  // 190 models of 100 sources each is a 1 MB body: more than the default limit.
  svc = await startTestService({ timeScale: 1000, bodyLimit: 4 * 1024 * 1024 });
  t = await svc.tenant();
  tenantId = (await svc.service.ctx.tenants.bySlug(t.slug))!.id;
  projectId = (await svc.project(t, 'dbt-sources')).id;
  base = `/projects/${projectId}`;
});
afterAll(() => svc?.close());

/** Statements naming any of `ids` (a read or write of one of those resources), inside transactions too. */
const statementsNaming = (db: Db, ids: string[]) =>
  countStatements(db, (_sql, params) => !!params?.some((p) => typeof p === 'string' && ids.includes(p)));

const connector = async (name: string, tables = 1_000) =>
  (
    await svc.ok<{ id: string; name: string }>(t, 'POST', `${base}/connectors`, {
      body: { name, connector_type: 'salesforce', selected_tables: Array.from({ length: tables }, (_, i) => `warehouse.table_${i}`) },
    })
  ).id;

const sources = (connectorId: string, n: number) =>
  Array.from({ length: n }, (_, k) => ({ connector_id: connectorId, table: `warehouse.table_${k}` }));

async function dbtProject(name: string, models: unknown[]): Promise<string> {
  return (
    await svc.ok<{ id: string }>(t, 'POST', `${base}/dbt-projects`, { body: { name, repository: 'https://git.example.com/a.git', models } })
  ).id;
}

async function run(dbtId: string): Promise<Run> {
  const { run_id } = await svc.ok<{ run_id: string }>(t, 'POST', `${base}/dbt-projects/${dbtId}/run`);
  return waitForRun(svc, t, `${base}/dbt-projects/${dbtId}/runs/${run_id}`, 60_000);
}

/** Sets a connector's status as a failed sync leaves it. */
async function markInError(connectorId: string): Promise<void> {
  const c = (await svc.service.ctx.resources.get(tenantId, projectId, 'connector', connectorId))!;
  c.data.status = 'error';
  await svc.service.ctx.resources.update(c);
}

describe('a dbt run reads the connectors its models read', () => {
  it('once for 190 ephemeral models of 100 sources each on one connector, not 19,000 times', async () => {
    const id = await connector('wide');
    const models = Array.from({ length: 190 }, (_, i) => ({ name: `m${i}`, materialization: 'ephemeral', sources: sources(id, 100) }));
    const dbtId = await dbtProject('ephemeral-wide', models);
    const reads = statementsNaming(svc.service.ctx.db as Db, [id]);
    const result = await run(dbtId);
    expect(result.status).toBe('succeeded');
    expect(result.models).toHaveLength(190);
    expect(result.models.every((m) => m.status === 'completed')).toBe(true);
    expect(reads.statements).toBe(1);
  }, 60_000);

  it('at most once per model build that takes time, however many sources the model has', async () => {
    const id = await connector('wide-views');
    const models = Array.from({ length: 20 }, (_, i) => ({ name: `v${i}`, materialization: 'view', sources: sources(id, 100) }));
    const dbtId = await dbtProject('views-wide', models);
    const reads = statementsNaming(svc.service.ctx.db as Db, [id]);
    const result = await run(dbtId);
    expect(result.status).toBe('succeeded');
    expect(result.models.every((m) => m.status === 'completed')).toBe(true);
    // Each view takes build time, after which its sources are read afresh (before: 2,000 reads).
    expect(reads.statements).toBeGreaterThanOrEqual(1);
    expect(reads.statements).toBeLessThanOrEqual(20);
  });

  it("writes the project's run status at the start and end without reading its 2,000 source references back", async () => {
    const id = await connector('refs-src', 10);
    const dbtId = await dbtProject(
      'refs-wide',
      Array.from({ length: 20 }, (_, i) => ({ name: `e${i}`, materialization: 'ephemeral', sources: sources(id, 100) })),
    );
    const refs = countStatements(svc.service.ctx.db as Db, (sql) => sql.includes('resource_refs'));
    expect((await run(dbtId)).status).toBe('succeeded');
    // The status is a computed field: update() compared every reference row at both ends (and sealed the secrets again).
    expect(refs.statements).toBe(0);
  });

  it('fails the same models with the same messages: the first source, in declaration order, whose connector is gone or in error', async () => {
    const [ok, broken, gone] = [await connector('ok-src', 3), await connector('broken-src', 3), await connector('gone-src', 3)];
    const src = (connectorId: string, table: string) => ({ connector_id: connectorId, table });
    const dbtId = await dbtProject('mixed-sources', [
      { name: 'a_ok', materialization: 'ephemeral', sources: [src(ok, 't1'), src(ok, 't2')] },
      { name: 'b_broken_second', materialization: 'ephemeral', sources: [src(ok, 't1'), src(broken, 't2'), src(gone, 't3')] },
      { name: 'c_gone_first', materialization: 'ephemeral', sources: [src(gone, 't3'), src(broken, 't2')] },
      { name: 'd_view_ok', materialization: 'view', sources: [src(ok, 't3')] },
      { name: 'e_after_broken', materialization: 'ephemeral', depends_on: ['b_broken_second'], sources: [src(ok, 't1')] },
      { name: 'f_broken_after_time', materialization: 'table', sources: [src(broken, 't1')] },
      { name: 'g_no_sources', materialization: 'ephemeral' },
    ]);
    await markInError(broken);
    // Gone as a connector deleted under an older declaration would be (a delete is refused while a dbt project names it).
    await (svc.service.ctx.db as Db).run('DELETE FROM resources WHERE id = ?', [gone]);
    const reads = statementsNaming(svc.service.ctx.db as Db, [ok, broken, gone]);
    const result = await run(dbtId);
    expect(result.status).toBe('failed');
    const inError = 'connector "broken-src" is in error (its last sync failed)';
    expect(result.models.map((m) => [m.name, m.status, m.error])).toEqual([
      ['a_ok', 'completed', null],
      ['b_broken_second', 'failed', `source t2: ${inError}`],
      ['c_gone_first', 'failed', `source t3: connector ${gone} no longer exists`],
      ['d_view_ok', 'completed', null],
      ['e_after_broken', 'skipped', 'upstream model b_broken_second failed'],
      ['f_broken_after_time', 'failed', `source t1: ${inError}`],
      ['g_no_sources', 'completed', null],
    ]);
    expect(result.error).toBe(
      `3 of 7 models failed: b_broken_second: source t2: ${inError}; c_gone_first: source t3: connector ${gone} no longer exists; f_broken_after_time: source t1: ${inError}`,
    );
    // Before d_view_ok's build time: a_ok reads ok, b_broken_second broken and gone in one statement,
    // the rest of the batch nothing; after it, f_broken_after_time reads broken again (before: 7 reads).
    expect(reads.statements).toBe(3);
  });

  it('sees a connector that fails after the models built before it took build time', async () => {
    const id = await connector('fails-midway', 3);
    const dbtId = await dbtProject('midway', [
      { name: 'first', materialization: 'table', sources: [{ connector_id: id, table: 't' }] },
      { name: 'second', materialization: 'view', sources: [{ connector_id: id, table: 't' }] },
    ]);
    const rt = runtimeOf(svc.service.ctx);
    // The connector's sync fails while `first` builds (its simulated build time is a timer).
    const simulate = rt.simulate.bind(rt);
    let once = true;
    rt.simulate = async (seconds, signal) => {
      if (once) {
        once = false;
        await markInError(id);
      }
      return simulate(seconds, signal);
    };
    try {
      const result = await run(dbtId);
      expect(result.models.map((m) => [m.name, m.status])).toEqual([
        ['first', 'completed'],
        ['second', 'failed'],
      ]);
      expect(result.models[1].error).toBe('source t: connector "fails-midway" is in error (its last sync failed)');
    } finally {
      rt.simulate = simulate;
    }
  });

  it('starts each model on a new turn of the event loop, even models that take no build time', async () => {
    const id = await connector('broken-for-turns', 3);
    const models = Array.from({ length: 300 }, (_, i) => ({ name: `f${i}`, sources: [{ connector_id: id, table: 't' }] }));
    const dbtId = await dbtProject('all-fail', models);
    await markInError(id);
    const rt = runtimeOf(svc.service.ctx);
    // Started here rather than over HTTP, to count the turns of the run alone. On SQLite every
    // query resolves at once, and failed models wait for nothing: before, the run took no turn at all.
    const started = await startDbtRun(rt, { tenantId, projectId, dbtProjectId: dbtId, trigger: 'manual' });
    const { result, turns } = await turnsDuring(() => started.done);
    expect(result?.status).toBe('failed');
    expect(result?.models.every((m) => m.status === 'failed')).toBe(true);
    // About one a model (the counter's first turn and the run's first can be the same one).
    expect(turns).toBeGreaterThanOrEqual(299);
  });
});
