import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import type { Db, Queryable, SqlValue } from '../../src/service/store/db.js';
import { waitForRun } from './runtime/helpers.js';

/**
 * Issue 18: a read must not write to the database. At 100,000 resources a write per GET is what
 * made PostgreSQL lists 0.45x of SQLite (every GET wrote a rate-limit row). The writes reads may
 * still cause, each bounded per minute whatever the request rate, are named here: rate-limit
 * reservations (a batch per reservation, doubling), an API key's last_used_at (once a minute), and
 * a connector's discovered schema (GET .../schema reads the source and stores what it found; the
 * same tables again within a minute are not written).
 */
const BOUNDED = [/rate_counters/, /last_used_at/];

describe('reads do not write', () => {
  let svc: TestService;
  let t: TestTenant;
  const paths: string[] = [];
  const writes: string[] = [];
  let current = '';

  beforeAll(async () => {
    svc = await startTestService({ rateLimit: 1_000_000 });
    t = await svc.tenant();
    const p = `/projects/${(await svc.project(t, 'reads')).id}`;
    const connector = await svc.ok(t, 'POST', `${p}/connectors`, {
      body: { name: 'crm', connector_type: 'salesforce', selected_tables: ['Account'] },
    });
    const sync = await svc.ok<{ run_id: string }>(t, 'POST', `${p}/connectors/${connector.id}/sync`, {}, 201);
    await waitForRun(svc, t, `${p}/connectors/${connector.id}/runs/${sync.run_id}`);
    const channel = await svc.ok(t, 'POST', `${p}/notification-channels`, {
      body: { name: 'mail', type: 'email', config: { email_addresses: ['a@example.com'] } },
    });
    const pipeline = await svc.ok(t, 'POST', `${p}/pipelines`, {
      body: { name: 'nightly', steps: [{ name: 'tell', type: 'notification', channel_id: channel.id }] },
    });
    const dbt = await svc.ok(t, 'POST', `${p}/dbt-projects`, {
      body: { name: 'models', repository: 'https://git.example.com/m.git', models: [{ name: 'a' }, { name: 'b', depends_on: ['a'] }] },
    });
    await svc.ok(t, 'POST', `${p}/alert-rules`, {
      body: { name: 'failed', severity: 'warning', condition: { metric: 'run_failed', operator: 'gte', threshold: 1 } },
    });
    paths.push(
      '/projects',
      p,
      `${p}/connectors`,
      `${p}/connectors/${connector.id}`,
      `${p}/connectors/${connector.id}/runs`,
      `${p}/connectors/${connector.id}/runs/${sync.run_id}`,
      `${p}/connectors/${connector.id}/schema`,
      `${p}/pipelines`,
      `${p}/pipelines/${pipeline.id}`,
      `${p}/pipelines/${pipeline.id}/runs`,
      `${p}/dbt-projects/${dbt.id}`,
      `${p}/dbt-projects/${dbt.id}/models`,
      `${p}/dbt-projects/${dbt.id}/lineage`,
      `${p}/infrastructure`,
      `${p}/alerts?status=firing`,
      `${p}/alert-rules`,
      `${p}/notification-channels`,
      `${p}/escalation-policies`,
      `${p}/classifications`,
      `${p}/masking-policies`,
      `${p}/audit-logs`,
      '/users',
    );
    // Discovery stores what it found; the same tables found again within a minute are not written again.
    await svc.ok(t, 'GET', `${p}/connectors/${connector.id}/schema`);
    // Every statement that can write, from here on (the service and its background work share this object).
    const db = svc.service.ctx.db as Db;
    const record = (sql: string) => {
      if (!BOUNDED.some((r) => r.test(sql))) writes.push(`${current}: ${sql.replace(/\s+/g, ' ').slice(0, 120)}`);
    };
    const { run, write, tx } = db;
    db.run = (sql, params) => (/^\s*(SELECT|WITH)\b/i.test(sql) || record(sql), run.call(db, sql, params));
    db.write = <T>(sql: string, params?: SqlValue[]) => (record(sql), write.call(db, sql, params) as Promise<T | undefined>);
    db.tx = <T>(fn: (q: Queryable) => Promise<T>) => (record('(transaction)'), tx.call(db, fn) as Promise<T>);
  }, 60_000);
  afterAll(() => svc?.close());

  it('GETs of every kind, list and item, as a user and as an API key, write nothing else', async () => {
    const key = await svc.apiKey(t, paths[1].split('/')[2], 'read-only');
    writes.length = 0;
    for (let round = 0; round < 3; round++) {
      for (const path of paths) {
        // A project key reads its project (least privilege, docs/security.md); /projects and /users need a user.
        const tokens = path.startsWith('/projects/') ? [t.adminToken, key.key] : [t.adminToken];
        for (const token of tokens) {
          current = `GET ${path}`;
          const res = await svc.call(t, 'GET', path, { token });
          expect(res.status, `${path}: ${res.text}`).toBe(200);
        }
      }
    }
    expect(writes).toEqual([]);
  });
});
