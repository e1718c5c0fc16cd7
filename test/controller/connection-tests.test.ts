import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { DataPlatformClient } from '../../src/client/index.js';
import { DirectorySource, type RunningController } from '../../src/controller/index.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { clientFor } from '../integration/engine/helpers.js';
import { closedPort, createSourceDb } from '../integration/runtime/helpers.js';
import { startTestController, waitFor } from './helpers.js';

/**
 * `dpctl controller --test-connections`: a connector with a wrong host is healthy by its state
 * (never run), so without a test the controller called the revision Ready. With it, the failed
 * test shows the connector degraded with the platform's reason (Ready=False), the next runs do
 * not test it again before its back-off, a passed test is not repeated, and a fixed revision
 * converges. Real service, real connection tests (a closed port, then a real PostgreSQL source).
 */
let svc: TestService;
let t: TestTenant;
let client: DataPlatformClient;
let ctl: RunningController;
let port: number;
const dir = join(mkdtempSync(join(tmpdir(), 'dp-ctl-conn-')), 'conn-tests');

const platform = (orders: { host: string; port: number; database: string; username: string }) =>
  [
    'apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: conn-ctl\nspec:\n  description: controller connection tests\n',
    'apiVersion: dataplatform/v1\nkind: Connector\nmetadata:\n  name: crm\n  project: conn-ctl\nspec:\n  connector_type: salesforce\n',
    `apiVersion: dataplatform/v1\nkind: Connector\nmetadata:\n  name: orders-db\n  project: conn-ctl\nspec:\n  connector_type: postgresql\n  config:\n    host: ${orders.host}\n    port: ${orders.port}\n    database: ${orders.database}\n  credentials:\n    username: ${orders.username}\n`,
  ].join('---\n');

const TEST_ENDPOINT = 'POST /projects/{id}/connectors/{resourceId}/test';
const testsSent = () => client.stats().byEndpoint[TEST_ENDPOINT]?.calls ?? 0;
const row = (name: string) => ctl.status().resources.find((r) => r.name === name)!;
const condition = (type: string) => ctl.status().conditions.find((c) => c.type === type)!;
const runAgain = async (reason: string) => {
  const runs = ctl.status().runs;
  ctl.trigger(reason);
  await waitFor(
    `run after ${reason}`,
    () => ctl.status().runs > runs && !ctl.status().conditions.some((c) => c.type === 'Reconciling' && c.message === 'a run is under way'),
  );
};

beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  port = await closedPort();
  mkdirSync(dir);
  writeFileSync(join(dir, 'platform.yaml'), platform({ host: '127.0.0.1', port, database: 'shop', username: 'loader' }));
  client = clientFor(svc, t);
  ctl = await startTestController({
    source: new DirectorySource(dir),
    client,
    mode: 'apply',
    testConnections: true,
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

test('a connector whose connection test fails is degraded with the reason: the revision is not Ready', () => {
  const s = ctl.status();
  expect(s.controller.test_connections).toBe(true);
  expect(s.last_run).toMatchObject({
    result: 'degraded',
    errors: [expect.stringMatching(/^Connector conn-ctl\/orders-db: degraded: connection test failed: Host unreachable: connection to 127\.0\.0\.1:\d+ refused/)],
  });
  expect(row('orders-db')).toMatchObject({ state: 'degraded', health: 'degraded', health_reason: expect.stringContaining('connection test failed') });
  // The one whose test passed has shown it works: healthy, not "never run".
  expect(row('crm')).toMatchObject({ state: 'applied', health: 'healthy', health_reason: null });
  expect(row('crm').never_run).toBeUndefined();
  expect(condition('Ready')).toMatchObject({ status: 'False', reason: 'Degraded' });
  expect(condition('Stalled')).toMatchObject({ status: 'True', reason: 'Degraded' });
  expect(testsSent()).toBe(2);
});

test('/status.json?view=summary lists only the rows in trouble and counts the rest (dpctl controller status reads it)', async () => {
  const summary = (await (await fetch(`${ctl.url}/status.json?view=summary`)).json()) as any;
  expect(summary.view).toBe('summary');
  // drift: what the first run's plan found (the three resources missing), before it applied them.
  expect(summary.resources.map((r: { name: string }) => r.name)).toEqual(['orders-db']);
  expect(summary.resource_counts).toEqual({ by_state: { applied: 2, degraded: 1 }, declared: 3, pruned: 0, drift: 3 });
  expect(summary.last_run.result).toBe('degraded');
  const whole = (await (await fetch(`${ctl.url}/status.json`)).json()) as any;
  expect(whole.resources).toHaveLength(3);
  const bad = await fetch(`${ctl.url}/status.json?view=everything`);
  expect(bad.status).toBe(400);
  expect(await bad.json()).toEqual({ error: { code: 'validation_error', message: 'view must be summary (or absent for the whole status), got "everything"' } });
});

test('the next run tests neither again: the passed one is remembered, the failed one waits out its back-off and stays degraded', async () => {
  await runAgain('unchanged');
  expect(testsSent()).toBe(2);
  expect(ctl.status().last_run!.result).toBe('degraded');
  expect(row('orders-db')).toMatchObject({ state: 'degraded', health_reason: expect.stringContaining('Host unreachable') });
  expect(row('crm')).toMatchObject({ state: 'in-sync', health: 'healthy' });
});

test('a revision that fixes the host is written, tested at once and converges: Ready=True', async () => {
  const source = await createSourceDb();
  writeFileSync(join(dir, 'platform.yaml'), platform({ ...source, username: source.admin.username }));
  await runAgain('fixed');
  expect(testsSent()).toBe(3);
  expect(ctl.status().last_run).toMatchObject({ result: 'converged', errors: [] });
  expect(row('orders-db')).toMatchObject({ state: 'applied', health: 'healthy', action: 'update' });
  expect(condition('Ready')).toMatchObject({ status: 'True', reason: 'Succeeded' });
  expect(condition('Ready').message).not.toContain('never run');
});

test('a connector that synced, then changed to a dead host: the failed test degrades it (its sync proved the old settings only)', async () => {
  const project = (await client.projects.list()).data.find((p) => p.name === 'conn-ctl')!;
  const connectors = client.resources('connector', { projectId: project.id });
  const live = async () => (await connectors.list()).data.find((c) => c.name === 'orders-db')!;
  await client.syncConnector(project.id, (await live()).id);
  await waitFor('the sync to end', async () => (await live()).status === 'active');
  writeFileSync(join(dir, 'platform.yaml'), platform({ host: '127.0.0.1', port, database: 'shop', username: 'loader' }));
  await runAgain('broken after a sync');
  expect(testsSent()).toBe(4);
  expect(ctl.status().last_run!.result).toBe('degraded');
  expect(row('orders-db')).toMatchObject({ state: 'degraded', health_reason: expect.stringContaining('Host unreachable') });
  expect(condition('Ready')).toMatchObject({ status: 'False' });
  // Unchanged: not tested again before its back-off, and still degraded (it said converged, Ready=True).
  await runAgain('unchanged, still broken');
  expect(testsSent()).toBe(4);
  expect(ctl.status().last_run!.result).toBe('degraded');
  expect(row('orders-db')).toMatchObject({ state: 'degraded' });
});
