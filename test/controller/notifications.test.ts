import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { DPCTL } from '../support/cli.js';
import { loadOrCreateTls } from '../../src/service/tls.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { cliEnvFor } from '../integration/engine/helpers.js';
import { waitFor } from './helpers.js';

/**
 * `dpctl controller` (the built binary) notifies a local HTTPS receiver configured by the
 * environment, as the deploy manifests do from a Secret: a degraded resource once (not at every
 * run), its recovery and the revision applied after a fix, and a suspension; every body signed.
 */
const SECRET = 'notify-signing-secret';
let svc: TestService;
let t: TestTenant;
let receiver: Server;
let receiverUrl: string;
let caPath: string;
let controller: ChildProcess | undefined;
const events: Record<string, any>[] = [];
const signatures: boolean[] = [];
const dir = join(mkdtempSync(join(tmpdir(), 'dp-notify-ctl-')), 'notify');

const config = (region: string) => `apiVersion: dataplatform/v1
kind: Project
metadata:
  name: notify-ctl
spec:
  description: notifications
---
apiVersion: dataplatform/v1
kind: InfrastructureResource
metadata:
  name: lake
  project: notify-ctl
spec:
  resource_type: bucket
  provider: aws
  region: ${region}
`;

beforeAll(async () => {
  svc = await startTestService({ timeScale: 20 });
  t = await svc.tenant();
  const tls = await loadOrCreateTls({ dataDir: mkdtempSync(join(tmpdir(), 'dp-receiver-')) });
  caPath = tls.certPath;
  receiver = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      signatures.push(req.headers['x-dpctl-signature-256'] === `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`);
      events.push(JSON.parse(body));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `https://localhost:${(receiver.address() as AddressInfo).port}/hooks/dpctl`;
  mkdirSync(dir);
  writeFileSync(join(dir, 'platform.yaml'), config('mars-1'));
});
afterAll(async () => {
  controller?.kill('SIGTERM');
  await new Promise<void>((resolve) => receiver?.close(() => resolve()));
  await svc?.close();
});

const reasons = () => events.map((e) => `${e.reason} ${e.subject}`);

test('degraded once, then recovered and applied after the fix; suspended; every body signed', { timeout: 90_000 }, async () => {
  let out = '';
  controller = spawn(
    process.execPath,
    [
      DPCTL,
      'controller',
      '--source',
      dir,
      '--listen',
      '127.0.0.1:0',
      '--interval',
      '500ms',
      '--state-dir',
      join(dir, '..', 'state'),
      '--webhook-secret',
      'ctl-secret',
    ],
    {
      env: {
        ...process.env,
        ...cliEnvFor(svc, t),
        DPCTL_NOTIFY_WEBHOOK_URLS: receiverUrl,
        DPCTL_NOTIFY_SECRET: SECRET,
        DPCTL_NOTIFY_CA_FILE: caPath,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  controller.stdout!.on('data', (d) => (out += d));
  controller.stderr!.on('data', (d) => (out += d));
  await waitFor(
    'a degraded notification',
    () => events.find((e) => e.reason === 'ResourceDegraded'),
    30_000,
    () => out,
  );
  const degraded = events.find((e) => e.reason === 'ResourceDegraded')!;
  expect(degraded).toMatchObject({
    severity: 'error',
    subject: 'InfrastructureResource notify-ctl/lake',
    source: 'notify',
    message: expect.stringContaining('aws has no region "mars-1"'),
  });
  // Runs every 500 ms go on; the condition is announced once.
  const url = out.match(/"url":"(http:\/\/127\.0\.0\.1:\d+)"/)?.[1] ?? out.match(/url=(http:\/\/127\.0\.0\.1:\d+)/)![1];
  await waitFor('three more runs', async () => ((await (await fetch(`${url}/status.json`)).json()) as { runs: number }).runs >= 4, 30_000);
  expect(reasons().filter((r) => r.startsWith('ResourceDegraded'))).toHaveLength(1);

  writeFileSync(join(dir, 'platform.yaml'), config('eu-west-1'));
  // The run's events are delivered concurrently: either may arrive first.
  await waitFor(
    'the revision applied and the recovery',
    () => events.some((e) => e.reason === 'RevisionApplied') && events.some((e) => e.reason === 'ResourceRecovered'),
    30_000,
    () => `${out}\n${reasons().join('\n')}`,
  );
  expect(reasons()).toContain('ResourceRecovered InfrastructureResource notify-ctl/lake');
  expect(events.find((e) => e.reason === 'RevisionApplied')).toMatchObject({
    severity: 'info',
    subject: 'notify',
    message: expect.stringMatching(/^revision sha256:[0-9a-f]{5}.* is applied and healthy$/),
  });

  const suspend = await fetch(`${url}/suspend`, { method: 'POST', headers: { authorization: 'Bearer ctl-secret' } });
  expect(suspend.status).toBe(200);
  await waitFor('a suspension notification', () => events.find((e) => e.reason === 'Suspended'), 10_000);
  expect(signatures.length).toBe(events.length);
  expect(signatures.every(Boolean)).toBe(true);
});
