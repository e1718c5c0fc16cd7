import { afterEach, describe, expect, test, vi } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bootstrapAccount, existingTenants, reachLines, serveCommand, serviceOptions } from '../../../src/cli/serve.js';
import { openServiceContext } from '../../../src/service/server.js';

afterEach(() => vi.unstubAllEnvs());

/** The flags as commander parses them from `dpctl serve <args>`, without running the action. */
function flags(...args: string[]) {
  const command = serveCommand().exitOverride();
  command.action(() => undefined);
  command.parse(args, { from: 'user' });
  return command.opts() as Parameters<typeof serviceOptions>[0];
}
const parseCidrList = (text: string, source: string) => [`${source}:${text}`];

describe('dpctl serve: flags to service options', () => {
  test('defaults', () => {
    for (const name of [
      'DP_DATABASE_URL',
      'DP_SECRETS_KEY',
      'DP_TRUST_PROXY',
      'DP_SMTP_URL',
      'DP_METRICS_TOKEN',
      'DP_EGRESS_DENY',
      'DP_EGRESS_ALLOW',
      'DP_LOG_LEVEL',
    ])
      vi.stubEnv(name, undefined);
    const o = serviceOptions(flags(), parseCidrList);
    expect(o).toMatchObject({
      port: 8443,
      host: '127.0.0.1',
      dataDir: '.dpctl-data',
      rateLimit: 600,
      accessTokenTtl: 3600,
      strictSpec: false,
    });
    expect(o).toMatchObject({ timeScale: 1, sourceTimeout: 5, sourceQueryTimeout: 300, metrics: true, logLevel: 'info' });
    expect([o.databaseUrl, o.secretsKey, o.metricsToken, o.egressDeny, o.egressAllow, o.smtpUrl]).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });

  test('login thresholds are rounded up; CIDR lists and the environment stand in for flags', () => {
    vi.stubEnv('DP_DATABASE_URL', 'postgres://db/x');
    vi.stubEnv('DP_EGRESS_ALLOW', '10.1.0.0/16');
    vi.stubEnv('DP_METRICS_TOKEN', 'm');
    const o = serviceOptions(
      flags('--login-lock-after', '2.5', '--login-max-lock', '0.2', '--egress-deny', 'none', '--port', '0', '--no-metrics'),
      parseCidrList,
    );
    expect([o.loginLockAfter, o.loginMaxLockSeconds, o.port, o.metrics]).toEqual([3, 1, 0, false]);
    expect([o.egressDeny, o.egressAllow, o.databaseUrl, o.metricsToken]).toEqual([
      ['--egress-deny:none'],
      ['DP_EGRESS_ALLOW:10.1.0.0/16'],
      'postgres://db/x',
      'm',
    ]);
    expect(serviceOptions(flags('--database-url', 'postgres://flag/y'), parseCidrList).databaseUrl).toBe('postgres://flag/y');
  });
});

describe('dpctl serve: the bootstrapped tenant', () => {
  test('DP_BOOTSTRAP_* first, the demo account with --demo for what they leave out, none when none is set', () => {
    expect(bootstrapAccount(false, {})).toBeUndefined();
    expect(bootstrapAccount(true, {})).toEqual({ slug: 'demo', email: 'admin@demo.local', password: 'demo-password' });
    expect(bootstrapAccount(true, { DP_BOOTSTRAP_TENANT: 'acme' })).toEqual({
      slug: 'acme',
      email: 'admin@demo.local',
      password: 'demo-password',
    });
    expect(bootstrapAccount(false, { DP_BOOTSTRAP_TENANT: '' })).toBeUndefined();
    expect(bootstrapAccount(false, { DP_BOOTSTRAP_TENANT: 'acme', DP_BOOTSTRAP_EMAIL: 'a@acme', DP_BOOTSTRAP_PASSWORD: 'pw' })).toEqual({
      slug: 'acme',
      email: 'a@acme',
      password: 'pw',
    });
  });

  test('some but not all of DP_BOOTSTRAP_* set (without --demo) is an error naming what is missing', () => {
    expect(() => bootstrapAccount(false, { DP_BOOTSTRAP_TENANT: 'acme', DP_BOOTSTRAP_EMAIL: 'a@acme' })).toThrow(
      'DP_BOOTSTRAP_PASSWORD is not set, but DP_BOOTSTRAP_TENANT and DP_BOOTSTRAP_EMAIL are: set all three',
    );
    expect(() => bootstrapAccount(false, { DP_BOOTSTRAP_PASSWORD: 'pw', DP_BOOTSTRAP_EMAIL: '' })).toThrow(
      'DP_BOOTSTRAP_TENANT and DP_BOOTSTRAP_EMAIL are not set, but DP_BOOTSTRAP_PASSWORD is: set all three',
    );
  });

  test('the banner: where the API is, how to sign in (only the demo password shown), the CA file and where email goes', () => {
    const service = {
      port: 8443,
      baseUrl: (slug: string) => `https://${slug}.localhost:8443/api/v1`,
      tls: { certPath: '/d/tls/cert.pem', certStats: () => ({ issued: 0, cached: 0 }) },
    };
    const demo = reachLines(service, '127.0.0.1', {
      account: { slug: 'demo', email: 'admin@demo.local', password: 'demo-password' },
      created: true,
    });
    expect(demo).toEqual([
      'Data Platform reference service listening on https://127.0.0.1:8443 (HTTPS only)',
      'Tenant "demo" created; admin admin@demo.local',
      'API:      https://demo.localhost:8443/api/v1',
      'Docs:     https://demo.localhost:8443/api/docs',
      `Login:    curl --cacert /d/tls/cert.pem -X POST https://demo.localhost:8443/api/v1/auth/login -H 'Content-Type: application/json' -d '{"email":"admin@demo.local","password":"demo-password"}'`,
      "CA file:  /d/tls/cert.pem (this service's own CA; pass it to clients)",
      'Email:    written to the email_outbox table (no --smtp-url)',
    ]);
    const own = reachLines({ ...service, smtpUrl: 'smtp://u:secret@mail:587' }, '0.0.0.0', {
      account: { slug: 'acme', email: 'a@acme', password: 'pw' },
      created: false,
    });
    expect(own[1]).toBe('Tenant "acme" ready; admin a@acme');
    expect(own[4]).toContain(`"password":"..."`);
    expect(own.at(-1)).toMatch(/^Email: {4}sent through smtp:\/\/u:/);
    expect(own.at(-1)).not.toContain('secret');
    // A certificate of the operator's (--tls-cert) is not a CA to hand out.
    expect(reachLines({ ...service, tls: { certPath: '/etc/tls/srv.pem' } }, '0.0.0.0', undefined)).toContain(
      'TLS:      /etc/tls/srv.pem (--tls-cert; clients trust the CA that signed it)',
    );
    const none = reachLines({ ...service, tls: {} }, '127.0.0.1', undefined);
    expect(none).toEqual([
      'Data Platform reference service listening on https://127.0.0.1:8443 (HTTPS only)',
      'Docs:     https://localhost:8443/api/docs',
      'No tenant bootstrapped: set DP_BOOTSTRAP_TENANT, DP_BOOTSTRAP_EMAIL and DP_BOOTSTRAP_PASSWORD, or run `dpctl tenant create`.',
      'Email:    written to the email_outbox table (no --smtp-url)',
    ]);
    expect(reachLines(service, '127.0.0.1', undefined, { count: 0 })).toEqual(reachLines(service, '127.0.0.1', undefined));
  });

  test('the banner without a bootstrap account but with tenants in the database: how many and where one is, no hint to create one', () => {
    const service = { port: 8443, baseUrl: (slug: string) => `https://${slug}.localhost:8443/api/v1`, tls: {} };
    const several = reachLines(service, '0.0.0.0', undefined, { count: 3, slug: 'acme' });
    expect(several).toEqual([
      'Data Platform reference service listening on https://0.0.0.0:8443 (HTTPS only)',
      'Docs:     https://localhost:8443/api/docs',
      'Tenants:  3 in the database, e.g. https://acme.localhost:8443/api/v1 (none bootstrapped from DP_BOOTSTRAP_*)',
      'Email:    written to the email_outbox table (no --smtp-url)',
    ]);
    expect(reachLines(service, '0.0.0.0', undefined, { count: 1, slug: 'acme' })[2]).toBe(
      'Tenants:  1 in the database, https://acme.localhost:8443/api/v1 (none bootstrapped from DP_BOOTSTRAP_*)',
    );
    expect(several.join('\n')).not.toContain('No tenant bootstrapped');
  });

  test('existingTenants counts the tenants table and names the first slug', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'dp-serve-banner-'));
    const ctx = await openServiceContext({ dataDir });
    try {
      expect(await existingTenants(ctx.db)).toEqual({ count: 0, slug: undefined });
      for (const slug of ['zeta', 'beta']) await ctx.tenants.create(slug);
      expect(await existingTenants(ctx.db)).toEqual({ count: 2, slug: 'beta' });
    } finally {
      await ctx.db.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
