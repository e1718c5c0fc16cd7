import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DataPlatformClient } from '../../../src/client/index.js';
import { preparePlan, reconcile, type EngineOptions } from '../../../src/engine/index.js';
import { FaultProxy } from '../../support/fault-proxy.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { clientFor, copyExample, edit, SECRET_ENV } from './helpers.js';

/**
 * The engine through a fault-injecting HTTPS proxy in front of the real service (the client's
 * own fault tests use the same proxy): 429 storms, 503s on reads, and connections dropped after
 * a create reached the service. The apply must converge with no duplicates.
 */
let svc: TestService;
let proxy: FaultProxy;
beforeAll(async () => {
  svc = await startTestService();
  proxy = await FaultProxy.start(svc);
});
afterAll(async () => {
  await proxy?.close();
  await svc?.close();
});

const FAST_RETRY = { retries: 4, minTimeoutMs: 5, maxTimeoutMs: 20, maxElapsedMs: 30_000, maxRateLimitWaits: 8 };
const opts: EngineOptions = { sourceId: 'platform', env: SECRET_ENV, concurrency: 4 };
const isAuth = (path: string) => path.startsWith('/api/v1/auth/');

const viaProxy = (t: TestTenant) =>
  new DataPlatformClient({
    url: `https://${t.slug}.localhost:${proxy.port}`,
    email: t.adminEmail,
    password: t.adminPassword,
    caFile: svc.service.tls.certPath,
    retry: FAST_RETRY,
  });

/** A seeded generator, so a failing run can be repeated. */
function mulberry32(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/** One resource per declared name, asked directly (not through the proxy); and a second plan with no changes. */
async function expectConverged(t: TestTenant, dir: string) {
  const direct = clientFor(svc, t);
  try {
    const projects = await direct.projects.listAll();
    expect(projects.map((p) => p.name).sort()).toEqual(['analytics', 'marketing']);
    let total = projects.length;
    for (const p of projects) {
      for (const kind of [
        'connector',
        'infrastructure_resource',
        'dbt_project',
        'pipeline',
        'notification_channel',
        'escalation_policy',
        'alert_rule',
        'classification',
        'masking_policy',
      ] as const) {
        const names = (await direct.resourcesOf(kind, { projectId: p.id }).listAll()).map((r) => String(r.name));
        expect(new Set(names).size, `${kind} in ${p.name}: ${names.join(', ')}`).toBe(names.length);
        total += names.length;
      }
    }
    const users = (await direct.users.listAll()).map((u) => u.email);
    expect(new Set(users).size).toBe(users.length);
    expect(total + users.length - 1).toBe(25); // the tenant's admin is not declared
    const { plan } = await preparePlan(direct, [dir], opts);
    expect(plan.changes.filter((c) => c.action !== 'no-op')).toEqual([]);
  } finally {
    await direct.close();
  }
}

describe('apply of examples/platform through faults', () => {
  test('a 429 storm (Retry-After: 1 for the first request of every endpoint): the apply waits, converges, no duplicates', async () => {
    const t = await svc.tenant();
    const dir = copyExample();
    proxy.inject(({ path, n }) =>
      !isAuth(path) && n === 1
        ? { status: 429, headers: { 'retry-after': '1' }, body: { error: { code: 'rate_limited', message: 'slow down' } } }
        : 'forward',
    );
    const client = viaProxy(t);
    try {
      const r = await reconcile(client, [dir], opts);
      expect(r.plan.errors).toEqual([]);
      expect(r.result!.outcomes.filter((o) => o.status !== 'done')).toEqual([]);
      expect(r.result!.converged).toBe(true);
      const stats = client.stats();
      const limited = Object.values(stats.byEndpoint).reduce((n, e) => n + e.rateLimited, 0);
      expect(limited).toBeGreaterThan(10);
      expect(proxy.seen.filter((s) => s.fault.includes('429')).length).toBe(limited);
    } finally {
      proxy.inject(() => 'forward');
      await client.close();
    }
    await expectConverged(t, dir);
  }, 120_000);

  test('random 503s on GET and a dropped connection after each first create was forwarded: converges, no duplicates', async () => {
    const t = await svc.tenant();
    const dir = copyExample();
    const random = mulberry32(20240601);
    const lastFailed = new Map<string, number>();
    let drops = 0;
    proxy.inject(({ method, path, n }) => {
      if (isAuth(path)) return 'forward';
      if (method === 'GET') {
        // About a third of reads fail, never more than twice in a row on one path (the client retries 4 times).
        const streak = lastFailed.get(path) ?? 0;
        if (streak < 2 && random() < 0.35) {
          lastFailed.set(path, streak + 1);
          return { status: 503 };
        }
        lastFailed.set(path, 0);
        return 'forward';
      }
      if (method === 'POST' && n === 1) {
        drops++;
        return 'forward-then-drop';
      }
      return 'forward';
    });
    const client = viaProxy(t);
    const progress: string[] = [];
    try {
      const r = await reconcile(client, [dir], { ...opts, onProgress: (l) => progress.push(l) });
      expect(r.plan.errors).toEqual([]);
      expect(r.result!.outcomes.filter((o) => o.status !== 'done')).toEqual([]);
      expect(r.result!.converged).toBe(true);
      expect(drops).toBeGreaterThan(5);
      expect(progress.filter((l) => l.includes('found it by name, so it was applied')).length).toBe(drops);
      expect(proxy.seen.filter((s) => s.fault.includes('503')).length).toBeGreaterThan(3);
    } finally {
      proxy.inject(() => 'forward');
      await client.close();
    }
    await expectConverged(t, dir);
  }, 120_000);

  test('apply runs at most --concurrency writes at once, and more than one when it can', async () => {
    const t = await svc.tenant();
    const dir = copyExample();
    // Slow writes, so that whatever the engine lets run in parallel overlaps at the proxy.
    proxy.inject(({ method, path }) => (!isAuth(path) && method !== 'GET' ? { delayMs: 150 } : 'forward'));
    const client = viaProxy(t);
    try {
      const r = await reconcile(client, [dir], { ...opts, concurrency: 3 });
      expect(r.result!.converged).toBe(true);
      expect(proxy.maxInFlight.get('POST')).toBe(3);
    } finally {
      proxy.inject(() => 'forward');
      await client.close();
    }
    await expectConverged(t, dir);
  }, 120_000);

  test('5xx on writes: a 503 to the first create of each collection, a 502 after an update was applied, a 503 to a delete; re-runs converge with no duplicates', async () => {
    const t = await svc.tenant();
    const dir = copyExample();
    const client = viaProxy(t);
    try {
      // Creates: the service never saw the first POST of each collection (503 from the proxy).
      proxy.inject(({ method, path, n }) => (!isAuth(path) && method === 'POST' && n === 1 ? { status: 503 } : 'forward'));
      let r = await reconcile(client, [dir], opts);
      const failedCreates = proxy.seen.filter((s) => s.method === 'POST' && s.fault.includes('503')).length;
      expect(failedCreates).toBeGreaterThan(5);
      for (let run = 0; run < 3 && !r.result!.converged; run++) r = await reconcile(client, [dir], opts);
      expect(r.result!.converged).toBe(true);
      proxy.inject(() => 'forward');
      await expectConverged(t, dir);

      // An update the service applied, but whose answer was lost to a 502: not re-sent blindly; the next plan sees it done.
      edit(dir, 'analytics/transform.yaml', 'schedule: "0 2 * * *"', 'schedule: "0 5 * * *"');
      proxy.inject(({ method, path }) => (!isAuth(path) && method === 'PATCH' ? { forwardThenStatus: 502 } : 'forward'));
      r = await reconcile(client, [dir], opts);
      expect(r.result!.outcomes.map((o) => [o.change.name, o.status])).toEqual([['nightly-revenue', 'failed']]);
      expect(proxy.seen.filter((s) => s.method === 'PATCH').length).toBe(1);
      proxy.inject(() => 'forward');
      const { plan } = await preparePlan(client, [dir], opts);
      expect(plan.changes.filter((c) => c.action !== 'no-op')).toEqual([]);

      // A delete answered 503 (not done): reported failed, done by the next run.
      const file = join(dir, 'marketing', 'marketing.yaml');
      writeFileSync(
        file,
        readFileSync(file, 'utf8')
          .split(/^---\n/m)
          .filter((d) => !/^kind: MaskingPolicy$/m.test(d))
          .join('---\n'),
      );
      proxy.inject(({ method, path }) => (!isAuth(path) && method === 'DELETE' ? { status: 503 } : 'forward'));
      r = await reconcile(client, [dir], { ...opts, prune: true });
      expect(r.result!.outcomes.map((o) => [o.change.action, o.change.name, o.status])).toEqual([['delete', 'redact-phones', 'failed']]);
      proxy.inject(() => 'forward');
      r = await reconcile(client, [dir], { ...opts, prune: true });
      expect(r.result!.outcomes.map((o) => [o.change.action, o.change.name, o.status])).toEqual([['delete', 'redact-phones', 'done']]);
      expect((await reconcile(client, [dir], { ...opts, prune: true })).plan.changes.filter((c) => c.action !== 'no-op')).toEqual([]);
    } finally {
      proxy.inject(() => 'forward');
      await client.close();
    }
  }, 180_000);
});
