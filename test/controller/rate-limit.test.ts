import { afterAll, beforeAll, expect, test } from 'vitest';
import { DataPlatformClient } from '../../src/client/index.js';
import { DirectorySource, type RunningController } from '../../src/controller/index.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { copyExample } from '../integration/engine/helpers.js';
import { startTestController, waitFor } from './helpers.js';

/**
 * Rate limits across the whole loop: the controller's one client is shared by every run, so a
 * 429 met in one run pauses that endpoint for the runs after it too (the runs come every
 * 300 ms; the pause is 2 s). The 429 and a 503 are injected by a proxy in front of the real
 * service, and the controller's metrics count them.
 */
let svc: TestService;
let proxy: FaultProxy;
let t: TestTenant;
let ctl: RunningController;
let inject: 'none' | '429' | '503' = 'none';
let limitedAt = 0;
const connectorLists: number[] = [];

beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  proxy = await FaultProxy.start(svc);
  proxy.rule = ({ method, path }) => {
    if (method === 'GET' && path.endsWith('/connectors')) {
      connectorLists.push(Date.now());
      if (inject === '429') {
        inject = 'none';
        limitedAt = Date.now();
        return { status: 429, headers: { 'retry-after': '2' }, body: { error: { code: 'rate_limited', message: 'Rate limit exceeded' } } };
      }
    }
    if (inject === '503' && method === 'GET' && path.endsWith('/pipelines')) {
      inject = 'none';
      return { status: 503, body: { error: { code: 'internal_error', message: 'injected' } } };
    }
    return 'forward';
  };
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
    listen: { host: '127.0.0.1', port: 0 },
  });
});
afterAll(async () => {
  await ctl?.stop();
  await proxy?.close();
  await svc?.close();
});

const metric = async (name: string, endpoint: string) => {
  const text = await (await fetch(`${ctl.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{endpoint="${endpoint}"}`));
  return line ? Number(line.split(' ').pop()) : 0;
};

test('a 429 in one run pauses the endpoint for the next runs too; 429s and 5xx are counted in /metrics', { timeout: 60_000 }, async () => {
  await waitFor(
    'a converged run',
    () => ctl.status().last_run?.result === 'converged',
    30_000,
    () => ctl.status().last_run,
  );
  const runsBefore = ctl.status().runs;
  inject = '429';
  await waitFor('the 429', () => limitedAt > 0, 10_000);
  // Runs go on every 300 ms, but none sends the paused request before the Retry-After has passed.
  await waitFor(
    'a converged run after the pause',
    () => Date.parse(ctl.status().last_run?.finished_at ?? '') > limitedAt + 2_000 && ctl.status().last_run?.result === 'converged',
    20_000,
    () => ctl.status().last_run,
  );
  // The example has two projects whose connector lists a run sends together: the other project's
  // list may already be on the wire when the 429 comes back, so it can reach the proxy just after.
  // That one is allowed; any list sent later in the pause would be a run that ignored it.
  const inFlightAt429 = connectorLists.filter((at) => at > limitedAt && at <= limitedAt + 250);
  expect(inFlightAt429.length).toBeLessThanOrEqual(1);
  const duringPause = connectorLists.filter((at) => at > limitedAt + 250 && at < limitedAt + 1_900);
  expect(duringPause).toEqual([]);
  expect(connectorLists.filter((at) => at >= limitedAt + 1_900).length).toBeGreaterThan(0);
  expect(ctl.status().runs).toBeGreaterThan(runsBefore);
  expect(await metric('dpctl_controller_api_rate_limited_total', 'GET /projects/{id}/connectors')).toBe(1);

  // A 503 on a list is retried by the client (a GET is safe to repeat); the run still converges and the error is counted.
  expect(await metric('dpctl_controller_api_errors_total', 'GET /projects/{id}/pipelines')).toBe(0);
  inject = '503';
  await waitFor(
    'the 503 counted',
    async () => (await metric('dpctl_controller_api_errors_total', 'GET /projects/{id}/pipelines')) === 1,
    20_000,
  );
  const runs = ctl.status().runs;
  await waitFor(
    'a converged run after the 503',
    () => ctl.status().runs > runs && ctl.status().last_run?.result === 'converged',
    20_000,
    () => ctl.status().last_run,
  );
});
