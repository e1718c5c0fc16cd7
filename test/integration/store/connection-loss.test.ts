import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { HEARTBEAT_MS } from '../../../src/service/runtime/runtime.js';
import { withPg } from '../../support/postgres-server.js';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';

/**
 * PostgreSQL connections break: a server restart, a failover, an operator's pg_terminate_backend.
 * node-postgres reports a connection that breaks while idle as an 'error' event of the pool, and
 * with no listener that event ended the service's process (every tenant's requests with it). Now
 * the pool drops the connection and the next request opens another.
 */
describe.skipIf(testStore() !== 'postgres')('PostgreSQL connections that break', () => {
  let svc: TestService;
  let t: TestTenant;
  beforeAll(async () => {
    svc = await startTestService();
    t = await svc.tenant();
  });
  afterAll(() => svc?.close());

  it('idle connections terminated by the server: the service goes on answering', async () => {
    const project = await svc.project(t, 'survives');
    // Several connections in the pool, idle.
    await Promise.all(Array.from({ length: 8 }, () => svc.ok(t, 'GET', `/projects/${project.id}/connectors`)));
    const { db } = svc.service.ctx;
    // From one of the pool's own connections: every other backend of this database goes.
    const others = await db.all<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
    );
    expect(others.length).toBeGreaterThan(0);
    for (const { pid } of others) await db.get('SELECT pg_terminate_backend(?)', [pid]);
    await new Promise((r) => setTimeout(r, 300));
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push((await svc.call(t, 'GET', `/projects/${project.id}/connectors`)).status);
    // A request on a connection the pool had not yet seen break may fail (500, in the envelope); then it recovers.
    expect(answers.slice(-5)).toEqual([200, 200, 200, 200, 200]);
  });

  it("the database refusing connections: every answer is the spec's envelope, none names the database; it answers again once the database is back", async () => {
    const project = await svc.project(t, 'outage');
    const { db } = svc.service.ctx;
    const logged = { error: vi.spyOn(svc.service.app.log, 'error'), info: vi.spyOn(svc.service.app.log, 'info') };
    const name = (await db.get<{ name: string }>('SELECT current_database() AS name'))!.name;
    const admin = inject('pgUrl');
    // An outage: the database takes no new connection, and every open one is ended.
    await withPg(admin, (c) => c.query(`ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS false`));
    try {
      await withPg(admin, (c) => c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]));
      const calls = [
        svc.call(t, 'POST', `/projects/${project.id}/notification-channels`, {
          body: { name: 'c', type: 'email', config: { email_addresses: ['a@example.com'] } },
        }),
        svc.call(t, 'POST', `/projects/${project.id}/notification-channels`, { body: { bogus: 1 } }),
        svc.call(t, 'DELETE', `/projects/${project.id}`),
        svc.call(t, 'GET', `/projects/${project.id}/connectors`),
      ];
      // The load balancer's probes, on an address that is no tenant's: alive, not ready.
      const root = `https://localhost:${svc.port}`;
      expect((await svc.http.call('GET', `${root}/healthz`)).status).toBe(200);
      const ready = await svc.http.call('GET', `${root}/readyz`);
      expect([ready.status, ready.headers['retry-after'], ready.body]).toEqual([
        503,
        '5',
        { error: { code: 'internal_error', message: 'not ready: the database does not answer' } },
      ]);
      for (const res of await Promise.all(calls)) {
        // A body the schema refuses stays a 400; anything that needs the database is the envelope's internal_error.
        expect([400, 500]).toContain(res.status);
        expect(res.body).toMatchObject({
          error: { code: expect.stringMatching(/^(validation_error|internal_error)$/), message: expect.any(String) },
        });
        expect(res.text).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|FST_ERR|not currently accepting connections/);
      }
      // Two heartbeats and scheduler ticks fail meanwhile: the log says so once, without a stack.
      await new Promise((r) => setTimeout(r, 2 * HEARTBEAT_MS + 500));
    } finally {
      await withPg(admin, (c) => c.query(`ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS true`));
    }
    const back: number[] = [];
    for (let i = 0; i < 5; i++) back.push((await svc.call(t, 'GET', `/projects/${project.id}/connectors`)).status);
    expect(back.slice(-3)).toEqual([200, 200, 200]);
    // Ready again at the next check (a check answers the probes of one second).
    let ready = await svc.http.call('GET', `https://localhost:${svc.port}/readyz`);
    for (let i = 0; i < 30 && ready.status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 100));
      ready = await svc.http.call('GET', `https://localhost:${svc.port}/readyz`);
    }
    expect(ready.body).toEqual({ status: 'ready' });
    // The runtime said the outage once (a failure of a request is that request's line), and its end.
    const outage = logged.error.mock.calls.filter((c) => String(c[1]).startsWith('the database is unavailable'));
    expect(outage).toHaveLength(1);
    expect(outage[0][0]).toEqual({
      failed: expect.any(String),
      reason: expect.stringMatching(/not currently accepting connections|terminat/),
    });
    const background = /^(runtime heartbeat|runtime sweep|scheduler tick|schedule backfill|alert backfill|retention sweep) failed/;
    expect(logged.error.mock.calls.filter((c) => background.test(String(c[1])))).toEqual([]);
    for (let i = 0; i < 70 && !logged.info.mock.calls.some((c) => c[1] === 'the database answers again'); i++)
      await new Promise((r) => setTimeout(r, 100));
    expect(logged.info.mock.calls.find((c) => c[1] === 'the database answers again')?.[0]).toEqual({
      seconds: expect.any(Number),
      unlogged: expect.any(Number),
    });
  }, 30_000);
});
