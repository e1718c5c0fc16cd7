import { afterAll, beforeAll, expect, test } from 'vitest';
import { DataPlatformClient } from '../../src/client/index.js';
import { DirectorySource, type RunningController } from '../../src/controller/index.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { copyExample } from '../integration/engine/helpers.js';
import { startTestController, waitFor } from './helpers.js';

/**
 * Per-resource exponential backoff, against the real service behind a proxy that refuses
 * every create of a classification while `failing` is set: the classifications back off
 * (not retried before their time), what needs them waits, everything else is applied.
 */
let svc: TestService;
let proxy: FaultProxy;
let t: TestTenant;
let ctl: RunningController;
let failing = true;

beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  proxy = await FaultProxy.start(svc);
  proxy.rule = ({ method, path }) =>
    failing && method === 'POST' && path.endsWith('/classifications')
      ? { status: 400, body: { error: { code: 'validation_error', message: 'injected failure' } } }
      : 'forward';
  ctl = await startTestController({
    source: new DirectorySource(copyExample()),
    client: new DataPlatformClient({
      url: `https://${t.slug}.localhost:${proxy.port}`,
      email: t.adminEmail,
      password: t.adminPassword,
      caFile: svc.service.tls.certPath,
    }),
    mode: 'apply',
    intervalMs: 300,
    backoff: { baseMs: 2_000, maxMs: 60_000 },
  });
});
afterAll(async () => {
  await ctl?.stop();
  await proxy?.close();
  await svc?.close();
});

const creates = () => proxy.seen.filter((r) => r.method === 'POST' && r.path.endsWith('/classifications')).length;
const row = (name: string) => ctl.status().resources.find((r) => r.name === name)!;

test(
  'a failing resource backs off exponentially without blocking the rest; it is applied once it can be',
  { timeout: 60_000 },
  async () => {
    await waitFor(
      'a run with the classifications failed',
      () => row('pii-email')?.state === 'failed' && ctl.status(),
      30_000,
      () => ctl.status().last_run,
    );
    const status = ctl.status();
    expect(status.last_run!.result).toBe('incomplete');
    expect(row('pii-email')).toMatchObject({ state: 'failed', failures: 1, detail: expect.stringContaining('injected failure') });
    // What references a classification waits for it; the rest is applied.
    expect(row('hash-emails')).toMatchObject({ state: 'skipped' });
    expect(row('orders-db').state).toBe('applied');
    expect(status.resources.filter((r) => r.state === 'applied').length).toBeGreaterThan(15);
    // In force, but not fully applied: no revision has converged yet.
    expect(status.revision.applied).not.toBeNull();
    expect(status.revision.converged).toBeNull();

    // Runs every 300 ms, but the classifications are not tried again for 2 s.
    const tried = creates();
    const runs = ctl.status().runs;
    await waitFor('two more runs', () => ctl.status().runs >= runs + 2);
    expect(creates()).toBe(tried);
    expect(row('pii-email')).toMatchObject({ state: 'backoff', failures: 1 });
    expect(row('hash-emails')).toMatchObject({
      state: 'backoff',
      detail: expect.stringMatching(/^waits for Classification analytics\/(pii-email|payment-card), which is backing off$/),
    });
    expect(row('orders-db').state).toBe('in-sync');

    // The second failure doubles the wait (4 s).
    const second = await waitFor('the second failure', () => (row('pii-email').failures === 2 ? row('pii-email') : undefined), 10_000);
    const waitMs = Date.parse(second.next_attempt_at!) - Date.parse(ctl.status().last_run!.finished_at);
    expect(waitMs).toBeGreaterThan(3_000);
    expect(waitMs).toBeLessThanOrEqual(4_100);

    // The service accepts them again: they and their dependents are applied at their next attempt.
    failing = false;
    await waitFor(
      'convergence',
      () => ctl.status().last_run?.result === 'converged',
      20_000,
      () => ctl.status().resources.filter((r) => r.state !== 'in-sync'),
    );
    expect(row('pii-email').state).toBe('applied');
    expect(row('hash-emails').state).toBe('applied');
    expect(ctl.status().revision.converged?.id).toBe(ctl.status().revision.applied?.id);
  },
);
