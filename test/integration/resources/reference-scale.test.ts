import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { BYSTANDER_MAX_MS, whileServingOther } from '../../abuse/support.js';
import { connectorBody, expectError } from './fixtures.js';
import { newId } from '../../../src/service/ids.js';
import { bulkInsert, RESOURCE_COLUMNS } from '../../support/bulk.js';
import { migrate } from '../../../src/service/store/migrations.js';
import type { Db } from '../../../src/service/store/db.js';
import { countRowsRead, countStatements } from '../../support/db-counters.js';
import { MAX_FIELD_ERRORS } from '../../../src/kinds/validator.js';

/**
 * Before a delete the service checks that nothing still names the resource (a pipeline step, an
 * alert rule's target...). That check must not read the project's referring resources: with
 * 20,000 pipelines, deleting 100 unused connectors read and parsed 2,000,000 rows, and on SQLite
 * each of those reads held every tenant's requests. resource_refs answers it with one lookup.
 */
const PIPELINES = 20_000;

describe(`deletes beside ${PIPELINES.toLocaleString('en-US')} pipelines`, () => {
  let svc: TestService;
  let owner: TestTenant;
  let bystander: TestTenant;
  let base: string;
  let projectId: string;
  let tenantId: string;
  let legacy: { id: string };

  beforeAll(async () => {
    svc = await startTestService({ rateLimit: 1_000_000 });
    [owner, bystander] = [await svc.tenant(), await svc.tenant()];
    projectId = (await svc.project(owner, 'many-pipelines')).id;
    base = `/projects/${projectId}`;
    const { db } = svc.service.ctx;
    tenantId = (await svc.service.ctx.tenants.bySlug(owner.slug))!.id;
    legacy = await svc.ok(owner, 'POST', `${base}/connectors`, { body: connectorBody('legacy') });
    // Straight into the table, as if written before resource_refs existed: every one names `legacy`.
    await bulkInsert(db, 'resources', RESOURCE_COLUMNS, PIPELINES, (n) => {
      const id = newId('pipeline');
      const data = { id, name: `p${n}`, steps: [{ name: 'sync', type: 'connector_sync', connector_id: legacy.id }] };
      return [id, tenantId, projectId, 'pipeline', '', `p${n}`, JSON.stringify(data), '2030-01-01T00:00:00Z', '2030-01-01T00:00:00Z'];
    });
    // Their rows come from the migration's fill, run again here as on a database migrated with them in it.
    await db.run('DROP TABLE resource_refs');
    await db.run('DELETE FROM schema_migrations WHERE id = 8');
    await migrate(db);
  }, 120_000);
  afterAll(() => svc?.close());

  it('the migration recorded what the stored pipelines name', async () => {
    const { n } = (await svc.service.ctx.db.get<{ n: number }>(
      'SELECT count(*) AS n FROM resource_refs WHERE tenant_id = ? AND target_id = ?',
      [tenantId, legacy.id],
    ))!;
    expect(Number(n)).toBe(PIPELINES);
    const error = expectError(await svc.call(owner, 'DELETE', `${base}/connectors/${legacy.id}`), 409, 'conflict');
    expect(error.message).toMatch(
      /^Connector "legacy" is used by pipeline "p\d+" \(steps\[0\]\.connector_id\); change or delete that first$/,
    );
  });

  it('deleting 100 unused connectors reads a few rows each, not the pipelines, while another tenant is served', async () => {
    const unused: { id: string }[] = [];
    for (let i = 0; i < 100; i++)
      unused.push(await svc.ok<{ id: string }>(owner, 'POST', `${base}/connectors`, { body: connectorBody(`unused-${i}`) }));
    const counter = countRowsRead(svc.service.ctx.db as Db);
    const { probe } = await whileServingOther(svc, bystander, async () => {
      for (const c of unused) await svc.ok(owner, 'DELETE', `${base}/connectors/${c.id}`, {}, 204);
    });
    // Authentication, the project, the connector, its lock: a handful of rows per delete (and the bystander's reads).
    expect(counter.rows).toBeLessThan(100 * 20 + probe.count * 20);
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
  }, 60_000);

  it('keeps the rows in step with writes: an update that drops a reference, a deleted referrer, a deleted project', async () => {
    const target = await svc.ok<{ id: string }>(owner, 'POST', `${base}/connectors`, { body: connectorBody('target') });
    const steps = [{ name: 'sync', type: 'connector_sync', connector_id: target.id }];
    const a = await svc.ok<{ id: string }>(owner, 'POST', `${base}/pipelines`, { body: { name: 'uses-a', steps } });
    const b = await svc.ok<{ id: string }>(owner, 'POST', `${base}/pipelines`, { body: { name: 'uses-b', steps } });
    expect(expectError(await svc.call(owner, 'DELETE', `${base}/connectors/${target.id}`), 409, 'conflict').message).toMatch(/uses-[ab]/);
    await svc.ok(owner, 'PATCH', `${base}/pipelines/${a.id}`, {
      body: { steps: [{ name: 'sync', type: 'connector_sync', connector_id: legacy.id }] },
    });
    expect(expectError(await svc.call(owner, 'DELETE', `${base}/connectors/${target.id}`), 409, 'conflict').message).toContain('"uses-b"');
    await svc.ok(owner, 'DELETE', `${base}/pipelines/${b.id}`, {}, 204);
    await svc.ok(owner, 'DELETE', `${base}/connectors/${target.id}`, {}, 204);

    const doomed = await svc.project(owner, 'doomed-refs');
    const c = await svc.ok<{ id: string }>(owner, 'POST', `/projects/${doomed.id}/connectors`, { body: connectorBody('c') });
    await svc.ok(owner, 'POST', `/projects/${doomed.id}/pipelines`, {
      body: { name: 'p', steps: [{ name: 'sync', type: 'connector_sync', connector_id: c.id }] },
    });
    await svc.ok(owner, 'DELETE', `/projects/${doomed.id}`, {}, 204);
    const left = await svc.service.ctx.db.get<{ n: number }>('SELECT count(*) AS n FROM resource_refs WHERE project_id = ?', [doomed.id]);
    expect(Number(left!.n)).toBe(0);
  });
});

describe('a create naming one connector 10,000 times', () => {
  let svc: TestService;
  afterAll(() => svc?.close());

  it('looks the connector up once, and still names every missing reference', async () => {
    svc = await startTestService({ rateLimit: 1_000_000 });
    const t = await svc.tenant();
    const base = `/projects/${(await svc.project(t, 'many-sources')).id}`;
    const orders = await svc.ok<{ id: string }>(t, 'POST', `${base}/connectors`, { body: connectorBody('orders') });
    // 100 models of 100 sources each (about 0.6 MB), all from the same connector.
    const models = Array.from({ length: 100 }, (_, m) => ({
      name: `m${m}`,
      sources: Array.from({ length: 100 }, (_, s) => ({ connector_id: orders.id, table: `t${s}` })),
    }));
    const counter = countRowsRead(svc.service.ctx.db as Db);
    await svc.ok(
      t,
      'POST',
      `${base}/dbt-projects`,
      { body: { name: 'wide', repository: 'https://git.example.com/wide.git', models } },
      201,
    );
    // The credential, the project's lock, one lookup of the connector, the name: not 10,000 reads of it.
    expect(counter.rows).toBeLessThan(50);
    models[7].sources[3].connector_id = 'con_missing';
    const error = expectError(
      await svc.call(t, 'POST', `${base}/dbt-projects`, { body: { name: 'broken', repository: 'https://git.example.com/b.git', models } }),
      422,
      'unprocessable_entity',
    );
    expect(error.details).toEqual([
      { field: 'models[7].sources[3].connector_id', message: 'no connector with id "con_missing" in this project' },
    ]);

    // 10,000 distinct missing connectors: looked up 1,024 at a time (it was a query each), and the
    // answer lists the first MAX_FIELD_ERRORS of them and counts the rest (it listed all 10,000).
    for (const [m, model] of models.entries())
      for (const [i, source] of model.sources.entries()) source.connector_id = `con_gone_${m}_${i}`;
    const statements = countStatements(svc.service.ctx.db as Db);
    const many = expectError(
      await svc.call(t, 'POST', `${base}/dbt-projects`, { body: { name: 'gone', repository: 'https://git.example.com/g.git', models } }),
      422,
      'unprocessable_entity',
    );
    expect(statements.statements).toBeLessThan(40);
    expect(many.details).toHaveLength(MAX_FIELD_ERRORS);
    expect(many.details?.[0]).toEqual({
      field: 'models[0].sources[0].connector_id',
      message: 'no connector with id "con_gone_0_0" in this project',
    });
    expect(many.message).toMatch(/; and 9,900 more$/);
  }, 60_000);
});
