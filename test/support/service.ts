import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { startService, type RunningService } from '../../src/service/server.js';
import { ensureTenantWithAdmin } from '../../src/service/bootstrap.js';
import { buildRelease } from '../../src/distribution/provider-release.js';
import type { ServiceOptions } from '../../src/service/context.js';
import { TestHttp, type CallOptions, type HttpResponse } from './http.js';

export interface TestTenant {
  slug: string;
  /** https://<slug>.localhost:<port>/api/v1 */
  base: string;
  adminEmail: string;
  adminPassword: string;
  adminToken: string;
  refreshToken: string;
}

/** Which store this test project runs on (the `postgres` project's global setup provides a server). */
export const testStore = (): 'sqlite' | 'postgres' => (process.env.DP_TEST_STORE === 'postgres' ? 'postgres' : 'sqlite');

/** A fresh, empty PostgreSQL database per service, so test files never see each other's rows. */
async function freshPostgresDatabase(adminUrl: string): Promise<string> {
  const name = `dp_test_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  await client.query(`CREATE DATABASE ${name}`);
  await client.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

export class TestService {
  private counter = 0;
  constructor(
    readonly service: RunningService,
    readonly http: TestHttp,
    readonly dataDir: string,
  ) {}

  get port() {
    return this.service.port;
  }

  url(slug: string, path = '') {
    return `${this.service.baseUrl(slug)}${path}`;
  }

  /** A new tenant with an admin user, logged in. */
  async tenant(slug = `t${++this.counter}${randomBytes(3).toString('hex')}`): Promise<TestTenant> {
    const adminEmail = `admin@${slug}.test`;
    const adminPassword = 'correct-horse-battery';
    await ensureTenantWithAdmin(this.service.ctx, slug, adminEmail, adminPassword);
    const login = await this.http.call('POST', this.url(slug, '/auth/login'), { body: { email: adminEmail, password: adminPassword } });
    if (login.status !== 200) throw new Error(`login failed: ${login.text}`);
    return {
      slug,
      base: this.url(slug),
      adminEmail,
      adminPassword,
      adminToken: login.body.access_token,
      refreshToken: login.body.refresh_token,
    };
  }

  call<T = any>(t: TestTenant | string, method: string, path: string, opts: CallOptions = {}): Promise<HttpResponse<T>> {
    const base = typeof t === 'string' ? this.url(t) : t.base;
    const token = opts.token ?? (typeof t === 'string' ? undefined : t.adminToken);
    return this.http.call<T>(method, `${base}${path}`, { ...opts, token });
  }

  /** Calls and insists on the expected status, so a failure shows the body. */
  async ok<T = any>(
    t: TestTenant,
    method: string,
    path: string,
    opts: CallOptions = {},
    expected = method === 'POST' ? 201 : method === 'DELETE' ? 204 : 200,
  ): Promise<T> {
    const res = await this.call<T>(t, method, path, opts);
    if (res.status !== expected) throw new Error(`${method} ${path}: expected ${expected}, got ${res.status}: ${res.text}`);
    return res.body;
  }

  async project(t: TestTenant, name = `p${++this.counter}`): Promise<{ id: string; name: string }> {
    return this.ok(t, 'POST', '/projects', { body: { name } });
  }

  async apiKey(t: TestTenant, projectId: string, level: 'read-only' | 'read-write' | 'admin'): Promise<{ id: string; key: string }> {
    return this.ok(t, 'POST', `/projects/${projectId}/api-keys`, {
      body: { name: `key-${level}-${++this.counter}`, permission_level: level },
    });
  }

  /** A user with a password, logged in. */
  async user(t: TestTenant, role: 'read-only' | 'read-write' | 'admin') {
    const email = `${role}-${++this.counter}@${t.slug}.test`;
    const password = 'users-password-1';
    const created = await this.ok(t, 'POST', '/users', { body: { email, role, password } });
    const login = await this.ok(t, 'POST', '/auth/login', { body: { email, password }, token: '' }, 200);
    return { id: created.id as string, email, password, token: login.access_token as string, refreshToken: login.refresh_token as string };
  }

  async close() {
    await this.service.close();
    await this.http.close();
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}

export async function startTestService(options: Partial<ServiceOptions> = {}): Promise<TestService> {
  const dataDir = mkdtempSync(join(tmpdir(), 'dp-test-'));
  const pgUrl = testStore() === 'postgres' ? inject('pgUrl') : undefined;
  const databaseUrl = options.databaseUrl ?? (pgUrl ? await freshPostgresDatabase(pgUrl) : undefined);
  // As `dpctl serve` does: the provider mirror serves the package's release (src/cli/serve.ts).
  const providerMirror = { files: async () => (await buildRelease()).files };
  const service = await startService({ port: 0, logLevel: 'silent', rateLimit: 100_000, ...options, dataDir, databaseUrl, providerMirror });
  return new TestService(service, new TestHttp(service.tls.certPath), dataDir);
}
