import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { DPCTL } from '../support/cli.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { cliEnvFor } from '../integration/engine/helpers.js';
import { waitFor } from './helpers.js';

/**
 * Issue 20's controller-side behaviours with `dpctl controller` as a child process (the built
 * binary, JSON logs): a per-resource policy (observe) honoured and reported on /status, an
 * invalid revision's errors root cause first, and the status page served with its live stream.
 */
let svc: TestService;
let t: TestTenant;
let child: ChildProcess | undefined;
let out = '';
const dir = join(mkdtempSync(join(tmpdir(), 'dp-gitops-proc-')), 'gitops');

const project = 'apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: gitops\nspec:\n  description: controller as a process\n';
const connector = (schedule: string, annotations = '') =>
  `apiVersion: dataplatform/v1\nkind: Connector\nmetadata:\n  name: orders\n  project: gitops\n${annotations}spec:\n  connector_type: mysql\n  config: { host: db.internal, port: 3306, database: shop }\n  schedule: "${schedule}"\n`;

beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  mkdirSync(dir);
  writeFileSync(join(dir, 'platform.yaml'), [project, connector('0 * * * *')].join('---\n'));
});
afterAll(async () => {
  child?.kill('SIGTERM');
  await svc?.close();
});

const statusOf = async (url: string) => (await fetch(`${url}/status.json`)).json() as Promise<any>;

test(
  'observe-only is reported as drift and never applied; an invalid revision shows its root cause first; the page and its stream are served',
  { timeout: 90_000 },
  async () => {
    child = spawn(
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
        '--log-format',
        'json',
      ],
      {
        env: { ...process.env, ...cliEnvFor(svc, t) },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    const url = await waitFor(
      'the listener',
      () => out.match(/"url":"(http:\/\/127\.0\.0\.1:\d+)"/)?.[1],
      20_000,
      () => out,
    );
    await waitFor(
      'converged',
      async () => (await statusOf(url)).last_run?.result === 'converged',
      30_000,
      () => out,
    );

    // Observe only: the change is on /status as drift, and the platform keeps its value.
    writeFileSync(
      join(dir, 'platform.yaml'),
      [project, connector('5 * * * *', '  annotations:\n    dpctl.dev/reconcile: observe\n')].join('---\n'),
    );
    await waitFor(
      'the observed drift',
      async () => (await statusOf(url)).resources.find((r: any) => r.name === 'orders')?.state === 'drifted',
      30_000,
      () => out,
    );
    const row = (await statusOf(url)).resources.find((r: any) => r.name === 'orders');
    expect(row.detail).toBe('observe only: schedule');
    const p = (await svc.ok(t, 'GET', '/projects')).data.find((x: { name: string }) => x.name === 'gitops');
    expect((await svc.ok(t, 'GET', `/projects/${p.id}/connectors`)).data[0].schedule).toBe('0 * * * *');

    // An invalid revision: a tab breaks the connector, and the project's document references nothing, so one root cause.
    writeFileSync(
      join(dir, 'platform.yaml'),
      [project, connector('5 * * * *').replace('  connector_type', '\tconnector_type')].join('---\n'),
    );
    await waitFor(
      'the invalid revision',
      async () => (await statusOf(url)).revision.invalid,
      30_000,
      () => out,
    );
    const invalid = (await statusOf(url)).revision.invalid;
    expect(invalid.errors[0]).toMatch(/^platform\.yaml:\d+:\d+: YAML syntax: /);

    const page = await (await fetch(`${url}/status`, { headers: { accept: 'text/html' } })).text();
    expect(page).toContain('gitops');
    const events = await fetch(`${url}/status/events`);
    expect(events.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = events.body!.getReader();
    const { value } = await reader.read();
    expect(new TextDecoder().decode(value)).toMatch(/retry: 5000|event: status/);
    await reader.cancel();
  },
);
