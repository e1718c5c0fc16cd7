import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AmbiguousCreateError,
  AmbiguousRequestError,
  ApiError,
  DataPlatformClient,
  NetworkError,
  type ClientConfig,
} from '../../../src/client/index.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { FAST_RETRY, FaultProxy, tenantUrl } from './helpers.js';

/**
 * Faults a healthy server cannot produce on demand, injected by a local HTTPS proxy in front
 * of the real service (see FaultProxy): 5xx storms, and connections dropped after the request
 * reached the service (which then really did the work).
 */
let skew = 0;
let svc: TestService;
let t: TestTenant;
let proxy: FaultProxy;
let projectId: string;
let apiKey: string;

/** The tenant with a fresh admin token (the refresh test moves the service clock past expiry). */
async function admin(): Promise<TestTenant> {
  t.adminToken = (
    await svc.http.call('POST', svc.url(t.slug, '/auth/login'), { body: { email: t.adminEmail, password: t.adminPassword } })
  ).body.access_token;
  return t;
}

beforeAll(async () => {
  svc = await startTestService({ accessTokenTtl: 60, clock: () => Date.now() + skew });
  t = await svc.tenant();
  projectId = (await svc.project(t, 'faults')).id;
  apiKey = (await svc.apiKey(t, projectId, 'admin')).key;
  proxy = await FaultProxy.start(svc);
});
afterAll(async () => {
  await proxy?.close();
  await svc?.close();
});

/** A TCP port that forwards to the service, and can go down (every connection ended, new ones refused) and come back on the same port. */
class TcpForwarder {
  private server: Server;
  private readonly sockets = new Set<Socket>();
  private constructor(
    private readonly target: number,
    readonly port: number,
  ) {
    this.server = this.serve();
  }

  static async start(target: number): Promise<TcpForwarder> {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', () => resolve()));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const f = new TcpForwarder(target, port);
    await f.up();
    return f;
  }

  private serve(): Server {
    return createServer((client) => {
      const upstream = connect(this.target, '127.0.0.1');
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
    });
  }

  async up(): Promise<void> {
    if (this.server.listening) return;
    this.server = this.serve();
    await new Promise<void>((resolve) => this.server.listen(this.port, '127.0.0.1', () => resolve()));
  }

  async down(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  close = () => (this.server.listening ? this.down() : Promise.resolve());
}

/** A client that talks to the service through the proxy. */
const viaProxy = (config: Partial<ClientConfig> = {}) =>
  new DataPlatformClient({ url: tenantUrl(svc, t, proxy.port), caFile: svc.service.tls.certPath, apiKey, retry: FAST_RETRY, ...config });

const connectorsPath = () => `/api/v1/projects/${projectId}/connectors`;
/** Connectors of that name as the service has them (asked directly, not through the proxy). */
async function stored(name: string) {
  const page = await svc.ok(await admin(), 'GET', `/projects/${projectId}/connectors`, { query: { limit: 100 } }, 200);
  return (page.data as { id: string; name: string }[]).filter((c) => c.name === name);
}
async function auditCreates(name: string) {
  const page = await svc.ok(
    await admin(),
    'GET',
    `/projects/${projectId}/audit-logs`,
    { query: { action: 'connector.create', limit: 100 } },
    200,
  );
  return (page.data as { resource_name: string; outcome: string }[]).filter((e) => e.resource_name === name);
}

describe('5xx and network errors on idempotent requests', () => {
  it('a 5xx storm on GET is retried with backoff until it passes', async () => {
    proxy.inject(({ method, path, n }) => (method === 'GET' && path === connectorsPath() && n <= 3 ? { status: 503 } : 'forward'));
    const client = viaProxy();
    try {
      const page = await client.resources('connector', { projectId }).list();
      expect(page.data).toEqual(expect.any(Array));
      expect(proxy.count('GET', connectorsPath())).toBe(4);
      expect(client.stats().byEndpoint['GET /projects/{id}/connectors']).toEqual({ calls: 4, retries: 3, rateLimited: 0, failed: 3 });
    } finally {
      await client.close();
    }
  });

  it('a storm longer than the retries ends with the last 5xx as a typed ApiError, after bounded attempts', async () => {
    proxy.inject(() => ({ status: 502, body: { error: { code: 'internal_error', message: 'upstream down' } } }));
    const client = viaProxy({ retry: { ...FAST_RETRY, retries: 2 } });
    try {
      const err = (await client
        .resources('connector', { projectId })
        .list()
        .catch((e: unknown) => e)) as ApiError;
      expect(err).toBeInstanceOf(ApiError);
      expect(err).toMatchObject({ status: 502, code: 'internal_error', serverMessage: 'upstream down', attempt: 3, requestId: 'proxy-3' });
      expect(proxy.count('GET', connectorsPath())).toBe(3);
    } finally {
      await client.close();
    }
  });

  it('a GET whose connection drops is retried', async () => {
    proxy.inject(({ method, n }) => (method === 'GET' && n === 1 ? 'forward-then-drop' : 'forward'));
    const client = viaProxy();
    try {
      expect((await client.resources('connector', { projectId }).list()).data).toEqual(expect.any(Array));
      expect(proxy.count('GET', connectorsPath())).toBe(2);
    } finally {
      await client.close();
    }
  });

  it('a DELETE whose connection dropped after it was done is retried, and the 404 of the retry counts as done', async () => {
    const created = await svc.ok(await admin(), 'POST', `/projects/${projectId}/connectors`, {
      body: { name: 'to-delete', connector_type: 'mysql' },
    });
    const path = `${connectorsPath()}/${created.id}`;
    proxy.inject(({ method, n }) => (method === 'DELETE' && n === 1 ? 'forward-then-drop' : 'forward'));
    const client = viaProxy();
    try {
      await client.resources('connector', { projectId }).delete(created.id);
      expect(proxy.count('DELETE', path)).toBe(2);
      expect(await stored('to-delete')).toEqual([]);
      // Without an ambiguous failure before it, a 404 is still an error.
      const again = await client
        .resources('connector', { projectId })
        .delete(created.id)
        .catch((e: unknown) => e);
      expect(again).toMatchObject({ status: 404, afterAmbiguousFailure: false });
    } finally {
      await client.close();
    }
  });
});

describe('requests that are not safe to repeat', () => {
  it('a create whose connection drops after the service did it raises AmbiguousCreateError and is not re-sent', async () => {
    proxy.inject(({ method }) => (method === 'POST' ? 'forward-then-drop' : 'forward'));
    const client = viaProxy();
    try {
      const err = (await client
        .resources('connector', { projectId })
        .create({ name: 'ambiguous', connector_type: 'mysql' })
        .catch((e: unknown) => e)) as AmbiguousCreateError;
      expect(err).toBeInstanceOf(AmbiguousCreateError);
      expect(err).toBeInstanceOf(AmbiguousRequestError);
      expect(err).toMatchObject({
        kind: 'connector',
        scope: 'project',
        projectId,
        identity: { field: 'name', value: 'ambiguous' },
        method: 'POST',
        route: '/projects/{id}/connectors',
      });
      expect(err.cause).toBeInstanceOf(NetworkError);
      expect((err.cause as NetworkError).url).toContain(`/api/v1/projects/${projectId}/connectors`);
      expect(`${err.message} ${err.stack} ${(err.cause as Error).message}`).not.toContain(apiKey);
      // Sent once, created once.
      expect(proxy.count('POST', connectorsPath())).toBe(1);
      expect(client.stats().byEndpoint['POST /projects/{id}/connectors']).toMatchObject({ calls: 1, retries: 0 });
      expect(await stored('ambiguous')).toHaveLength(1);
      expect(await auditCreates('ambiguous')).toHaveLength(1);
      // What the engine does next: look it up by name.
      proxy.inject(() => 'forward');
      expect((await client.resources('connector', { projectId }).findByName('ambiguous'))?.id).toBe((await stored('ambiguous'))[0].id);
    } finally {
      await client.close();
    }
  });

  it('a create answered 5xx (done or not, the client cannot tell) raises AmbiguousCreateError and is not re-sent', async () => {
    const users = viaProxy({ apiKey: undefined, email: t.adminEmail, password: t.adminPassword });
    try {
      // Login is a POST too, but a repeated login is harmless; it is not the one failing here.
      proxy.inject(({ method, path }) => (method === 'POST' && path.endsWith('/users') ? { forwardThenStatus: 500 } : 'forward'));
      const err = (await users.users
        .create({ email: 'Maybe.Created@Example.com', role: 'read-only' })
        .catch((e: unknown) => e)) as AmbiguousCreateError;
      expect(err).toBeInstanceOf(AmbiguousCreateError);
      expect(err).toMatchObject({
        kind: 'user',
        scope: 'tenant',
        projectId: undefined,
        identity: { field: 'email', value: 'Maybe.Created@Example.com' },
      });
      expect(err.cause).toBeInstanceOf(ApiError);
      expect(err.cause).toMatchObject({ status: 500 });
      expect(proxy.count('POST', '/api/v1/users')).toBe(1);
      proxy.inject(() => 'forward');
      expect(await users.users.findByName('maybe.created@example.com')).toMatchObject({ email: 'maybe.created@example.com' });
    } finally {
      await users.close();
    }
  });

  it('PATCH is not re-sent after a 5xx unless retryPatch is on', async () => {
    const created = await svc.ok(await admin(), 'POST', `/projects/${projectId}/connectors`, {
      body: { name: 'patchme', connector_type: 'mysql' },
    });
    const path = `${connectorsPath()}/${created.id}`;
    proxy.inject(({ method, n }) => (method === 'PATCH' && n === 1 ? { forwardThenStatus: 503 } : 'forward'));
    const strict = viaProxy();
    const lenient = viaProxy({ retryPatch: true });
    try {
      const err = await strict
        .resources('connector', { projectId })
        .update(created.id, { schedule: '0 1 * * *' })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AmbiguousRequestError);
      expect(err).not.toBeInstanceOf(AmbiguousCreateError);
      expect(proxy.count('PATCH', path)).toBe(1);

      proxy.inject(({ method, n }) => (method === 'PATCH' && n === 1 ? { forwardThenStatus: 503 } : 'forward'));
      const updated = await lenient.resources('connector', { projectId }).update(created.id, { schedule: '0 2 * * *' });
      expect(updated.schedule).toBe('0 2 * * *');
      expect(proxy.count('PATCH', path)).toBe(2);
    } finally {
      await strict.close();
      await lenient.close();
    }
  });

  it('a refresh whose outcome is unknown is never re-sent: the client logs in again and the session is not revoked', async () => {
    const email = `refresh-${Date.now()}@${t.slug}.test`;
    const password = 'refresh-Pass-31c9';
    const user = await svc.ok(await admin(), 'POST', '/users', { body: { email, role: 'read-write', password } });
    proxy.inject(({ method, path }) => (method === 'POST' && path.endsWith('/auth/refresh') ? 'forward-then-drop' : 'forward'));
    const client = viaProxy({ apiKey: undefined, email, password });
    try {
      await client.projects.list();
      skew += 61_000; // the access token expires
      await client.projects.list();
      expect(client.stats()).toMatchObject({ logins: 2, refreshes: 1 });
      expect(proxy.count('POST', '/api/v1/auth/refresh')).toBe(1);
      const sessions = await svc.service.ctx.db.all<{ revoked_at: string | null }>('SELECT revoked_at FROM sessions WHERE user_id = ?', [
        user.id,
      ]);
      expect(sessions.map((s) => s.revoked_at)).toEqual([null, null]);
    } finally {
      await client.close();
    }
  });
});

describe('connection failures, bounds and cancellation', () => {
  it('connection refused is retried (the request never left), then a NetworkError with the URL and without the key', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', () => resolve()));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const client = new DataPlatformClient({
      url: `https://${t.slug}.localhost:${port}`,
      caFile: svc.service.tls.certPath,
      apiKey,
      retry: { ...FAST_RETRY, retries: 2 },
    });
    try {
      const err = (await client
        .resources('connector', { projectId })
        .create({ name: 'never', connector_type: 'mysql' })
        .catch((e: unknown) => e)) as NetworkError;
      expect(err).toBeInstanceOf(NetworkError);
      expect(err.code).toBe('ECONNREFUSED');
      expect(err.url).toBe(`https://${t.slug}.localhost:${port}/api/v1/projects/${projectId}/connectors`);
      expect(err.message).toContain(err.url);
      expect(`${err.message} ${err.stack}`).not.toContain(apiKey);
      expect(client.stats().calls).toBe(3);
    } finally {
      await client.close();
    }
  });

  it('a service restart (connections refused for 3 s) is ridden out once the service has answered: the create lands once', async () => {
    const forwarder = await TcpForwarder.start(svc.port);
    const client = new DataPlatformClient({ url: tenantUrl(svc, t, forwarder.port), caFile: svc.service.tls.certPath, apiKey });
    try {
      await client.resources('connector', { projectId }).list(); // answered once
      await forwarder.down();
      const started = Date.now();
      const created = client.resources('connector', { projectId }).create({ name: 'across-restart', connector_type: 'mysql' });
      setTimeout(() => void forwarder.up(), 3_000);
      expect((await created).name).toBe('across-restart');
      expect(Date.now() - started).toBeGreaterThanOrEqual(2_900);
      expect(await stored('across-restart')).toHaveLength(1);
    } finally {
      await client.close();
      await forwarder.close();
    }
  });

  it('an AbortSignal stops a call during its backoff, and the client-wide signal stops every call', async () => {
    proxy.inject(() => ({ status: 503 }));
    const client = viaProxy({ retry: { retries: 5, minTimeoutMs: 10_000, maxTimeoutMs: 10_000, maxElapsedMs: 60_000 } });
    try {
      const started = Date.now();
      const err = await client
        .resources('connector', { projectId })
        .list({ signal: AbortSignal.timeout(150) })
        .catch((e: unknown) => e);
      expect((err as Error).name).toMatch(/AbortError|TimeoutError/);
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(client.stats().calls).toBe(1);
    } finally {
      await client.close();
    }
    const controller = new AbortController();
    const wide = viaProxy({
      signal: controller.signal,
      retry: { retries: 5, minTimeoutMs: 10_000, maxTimeoutMs: 10_000, maxElapsedMs: 60_000 },
    });
    try {
      const pending = wide.projects.list().catch((e: unknown) => e);
      setTimeout(() => controller.abort(), 100);
      expect(((await pending) as Error).name).toBe('AbortError');
      expect(await wide.projects.list().catch((e: unknown) => (e as Error).name)).toBe('AbortError');
    } finally {
      await wide.close();
    }
  });
});
