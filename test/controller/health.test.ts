import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { DirectorySource, type RunningController } from '../../src/controller/index.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { clientFor } from '../integration/engine/helpers.js';
import { startTestController, waitFor } from './helpers.js';

/**
 * The controller converges on health: it provisions what the revision declares and calls a
 * revision converged only when it is applied and healthy. A refused provisioning shows the
 * resource degraded with the platform's reason, Ready=False / Stalled=True, is retried with
 * back-off, and a fixed revision converges. Real service, simulated work at 20x.
 */
let svc: TestService;
let t: TestTenant;
let ctl: RunningController;
const dir = join(mkdtempSync(join(tmpdir(), 'dp-ctl-health-')), 'health');

const docs = (lakeRegion: string) =>
  ['Project health-ctl', 'InfrastructureResource wh warehouse snowflake eu-west-1', `InfrastructureResource lake bucket aws ${lakeRegion}`]
    .map((line) => {
      const [kind, name, type, provider, region] = line.split(' ');
      if (kind === 'Project')
        return `apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: ${name}\nspec:\n  description: controller health\n`;
      return `apiVersion: dataplatform/v1\nkind: ${kind}\nmetadata:\n  name: ${name}\n  project: health-ctl\nspec:\n  resource_type: ${type}\n  provider: ${provider}\n  region: ${region}\n`;
    })
    .join('---\n');

beforeAll(async () => {
  svc = await startTestService({ timeScale: 20 });
  t = await svc.tenant();
  mkdirSync(dir);
  writeFileSync(join(dir, 'platform.yaml'), docs('mars-1'));
  ctl = await startTestController({
    source: new DirectorySource(dir),
    client: clientFor(svc, t),
    mode: 'apply',
    // Runs only when triggered here.
    intervalMs: 3_600_000,
    listen: { host: '127.0.0.1', port: 0 },
    backoff: { baseMs: 60_000, maxMs: 60_000 },
  });
  await waitFor('the first run', () => ctl.status().last_run, 30_000);
});
afterAll(async () => {
  await ctl?.stop();
  await svc?.close();
});

const row = (name: string) => ctl.status().resources.find((r) => r.name === name)!;
const condition = (type: string) => ctl.status().conditions.find((c) => c.type === type)!;
const applyRuns = async () => {
  const p = (await svc.ok(t, 'GET', '/projects')).data.find((x: { name: string }) => x.name === 'health-ctl');
  return (await svc.ok(t, 'GET', `/projects/${p.id}/infrastructure/runs`, { query: { limit: 100 } })).data.length as number;
};
const runAgain = async (reason: string) => {
  const runs = ctl.status().runs;
  ctl.trigger(reason);
  await waitFor(
    `run after ${reason}`,
    () =>
      ctl.status().runs > runs &&
      !ctl.status().conditions.some((c) => c.type === 'Reconciling' && c.reason === 'Progressing' && c.message === 'a run is under way'),
  );
};

test('a refused provisioning: the resource is degraded with the reason, the revision is not converged, Ready=False and Stalled=True', async () => {
  const s = ctl.status();
  expect(s.last_run).toMatchObject({
    result: 'degraded',
    errors: [expect.stringMatching(/^InfrastructureResource health-ctl\/lake: degraded: status is failed: aws has no region "mars-1"/)],
  });
  expect(row('wh')).toMatchObject({ state: 'applied', health: 'healthy' });
  expect(row('lake')).toMatchObject({
    state: 'degraded',
    health: 'degraded',
    health_reason: expect.stringContaining('mars-1'),
    detail: expect.stringContaining('mars-1'),
  });
  expect(s.revision.applied).not.toBeNull();
  expect(s.revision.converged).toBeNull();
  expect(condition('Ready')).toMatchObject({ status: 'False', reason: 'Degraded', message: expect.stringContaining('mars-1') });
  expect(condition('Stalled')).toMatchObject({ status: 'True', reason: 'Degraded' });
  expect(condition('Reconciling')).toMatchObject({ status: 'False' });
  const metrics = await (await fetch(`${ctl.url}/metrics`)).text();
  expect(metrics).toContain('dpctl_controller_resource_health{kind="infrastructure_resource",health="degraded"} 1');
  expect(metrics).toContain('dpctl_controller_resource_health{kind="infrastructure_resource",health="healthy"} 1');
  expect(metrics).toContain('dpctl_controller_resources{state="degraded"} 1');
  const page = await (await fetch(`${ctl.url}/status`, { headers: { accept: 'text/html' } })).text();
  expect(page).toContain('Ready=False (Degraded)');
});

test('the refused provisioning backs off: the next run does not ask the platform again before its time', async () => {
  const before = await applyRuns();
  const transition = condition('Ready').last_transition_time;
  await runAgain('check backoff');
  expect(await applyRuns()).toBe(before);
  expect(row('lake')).toMatchObject({ state: 'degraded' });
  // Still False: the transition time stays.
  expect(condition('Ready').last_transition_time).toBe(transition);
});

test('a revision that fixes it is applied, provisioned and converged: Ready=True', async () => {
  writeFileSync(join(dir, 'platform.yaml'), docs('eu-west-1'));
  await runAgain('fixed');
  const s = ctl.status();
  expect(s.last_run).toMatchObject({ result: 'converged', errors: [] });
  expect(row('lake')).toMatchObject({ state: 'applied', health: 'healthy', action: 'replace' });
  expect(s.revision.converged).not.toBeNull();
  expect(condition('Ready')).toMatchObject({ status: 'True', reason: 'Succeeded' });
  expect(condition('Stalled')).toMatchObject({ status: 'False' });
  await runAgain('steady');
  expect(ctl.status().last_run!.result).toBe('converged');
  expect(row('lake')).toMatchObject({ state: 'in-sync', health: 'healthy' });
});
