import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type PeerCertificate } from 'node:tls';
import { readFileSync } from 'node:fs';
import { startTestService, testStore, type TestService, type TestTenant } from '../support/service.js';

describe('tenants on a base domain', () => {
  let svc: TestService;
  let t: TestTenant;
  beforeAll(async () => {
    svc = await startTestService({ baseDomain: 'data.example.test' });
    t = await svc.tenant();
  });
  afterAll(() => svc?.close());

  it('resolves <slug>.<base-domain> from the Host header, and unknown hosts are 404 in the envelope', async () => {
    const viaBase = await svc.http.call('GET', `https://localhost:${svc.port}/api/v1/projects`, {
      token: t.adminToken,
      headers: { host: `${t.slug}.data.example.test` },
    });
    expect(viaBase.status).toBe(200);
    // No tenant, so no certificate of its own: the default one (docs/security.md), then the 404.
    const unknown = await svc.http.call('GET', `https://localhost:${svc.port}/api/v1/projects`, {
      token: t.adminToken,
      headers: { host: 'nobody.data.example.test' },
      anyHostCertificate: true,
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('resource_not_found');
  });

  it('issues a certificate for a base-domain host name that verifies against the local CA', async () => {
    const cert = await new Promise<PeerCertificate>((resolve, reject) => {
      const socket = connect(
        { host: '127.0.0.1', port: svc.port, servername: `${t.slug}.data.example.test`, ca: readFileSync(svc.service.tls.certPath) },
        () => {
          resolve(socket.getPeerCertificate());
          socket.end();
        },
      );
      socket.on('error', reject);
    });
    expect(cert.subjectaltname).toBe(`DNS:${t.slug}.data.example.test`);
  });
});

/** Several replicas behind a load balancer share one PostgreSQL database: everything that must be shared is in it. */
describe.skipIf(testStore() !== 'postgres')('two replicas on one PostgreSQL database', () => {
  let a: TestService;
  let b: TestService;
  let t: TestTenant;
  beforeAll(async () => {
    a = await startTestService({ rateLimit: 4, clock: () => Date.parse('2026-01-01T00:00:10Z') });
    b = await startTestService({
      rateLimit: 4,
      clock: () => Date.parse('2026-01-01T00:00:10Z'),
      databaseUrl: a.service.ctx.options.databaseUrl,
    });
    t = await a.tenant();
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });
  const onB = (path: string, token = t.adminToken) => b.http.call('GET', `${b.url(t.slug)}${path}`, { token });
  const onA = (path: string, token = t.adminToken) => a.http.call('GET', `${a.url(t.slug)}${path}`, { token });

  it('a token issued by one replica works on the other, and writes are visible on both', async () => {
    const project = await a.project(t, 'shared');
    const fromB = await onB(`/projects/${project.id}`);
    expect(fromB.status).toBe(200);
    expect(fromB.body.name).toBe('shared');
  });

  it('one rate-limit quota per tenant and endpoint across replicas', async () => {
    const statuses = [];
    for (let i = 0; i < 6; i++) statuses.push((await (i % 2 ? onB('/users') : onA('/users'))).status);
    // The login in beforeAll used another endpoint; /users has 4 per minute across both replicas.
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
  });

  it('a refresh token spent on one replica and reused on the other revokes the session everywhere', async () => {
    const login = await a.http.call('POST', `${a.url(t.slug)}/auth/login`, { body: { email: t.adminEmail, password: t.adminPassword } });
    const first = await a.http.call('POST', `${a.url(t.slug)}/auth/refresh`, { body: { refresh_token: login.body.refresh_token } });
    expect(first.status).toBe(200);
    const reuse = await b.http.call('POST', `${b.url(t.slug)}/auth/refresh`, { body: { refresh_token: login.body.refresh_token } });
    expect(reuse.status).toBe(401);
    expect((await onA('/projects', first.body.access_token)).status).toBe(401);
  });
});
