import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Alert, DataPlatformClient } from '../../src/client/index.js';
import { runDpctl } from '../support/cli.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { clientFor, cliEnvFor } from '../integration/engine/helpers.js';
import { closedPort, eventually } from '../integration/runtime/helpers.js';

/**
 * `dpctl alerts list / ack / resolve`, the built binary against a real service over HTTPS. The
 * alerts are real: two run_failed rules (critical and warning) fire when a postgresql connector
 * pointing at a closed port fails its sync.
 */

let svc: TestService;
let t: TestTenant;
let env: Record<string, string>;
let client: DataPlatformClient;
let projectId: string;
/** The two alerts the failed sync fired, by severity. */
const fired: Record<'critical' | 'warning', Alert> = {} as never;

beforeAll(async () => {
  svc = await startTestService({ timeScale: 100 });
  t = await svc.tenant();
  env = cliEnvFor(svc, t);
  client = clientFor(svc, t);
  projectId = (await svc.project(t, 'ops')).id;
  await svc.project(t, 'quiet');
  const base = `/projects/${projectId}`;
  const config = { host: '127.0.0.1', port: await closedPort(), database: 'shop', ssl_mode: 'disable' };
  const connector = await svc.ok(t, 'POST', `${base}/connectors`, {
    body: {
      name: 'orders-db',
      connector_type: 'postgresql',
      config,
      credentials: { username: 'loader', password: 'pw' },
      selected_tables: ['public.orders'],
    },
  });
  const condition = { metric: 'run_failed', operator: 'gt', threshold: 0 };
  await svc.ok(t, 'POST', `${base}/alert-rules`, {
    body: { name: 'orders sync failed', severity: 'critical', condition, target: { connector_id: connector.id } },
  });
  await svc.ok(t, 'POST', `${base}/alert-rules`, { body: { name: 'any run failed', severity: 'warning', condition } });
  await client.syncConnector(projectId, connector.id);
  const alerts = await eventually(async () => {
    const all = await client.alerts(projectId).listAll();
    return all.length === 2 ? all : undefined;
  });
  for (const a of alerts) fired[a.severity as 'critical' | 'warning'] = a;
});
afterAll(async () => {
  await client?.close();
  await svc?.close();
});

const dpctl = (...args: string[]) => runDpctl(['alerts', ...args], { env });
/** Table rows (header first), split on the column gaps. */
const rows = (stdout: string) =>
  stdout
    .trimEnd()
    .split('\n')
    .map((l) => l.split(/ {2,}/));

describe('dpctl alerts list', () => {
  test('an aligned table: id, severity, status, rule name, fired time, message', async () => {
    const r = await dpctl('list', '--project', 'ops');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^ID +SEVERITY +STATUS +RULE +FIRED +MESSAGE$/);
    // Aligned: every column starts at the same offset on every line.
    for (const column of ['SEVERITY', 'STATUS', 'RULE', 'FIRED', 'MESSAGE']) {
      const at = lines[0].indexOf(column);
      for (const line of lines.slice(1)) expect(line[at - 1]).toBe(' ');
      for (const line of lines.slice(1)) expect(line[at]).not.toBe(' ');
    }
    const table = rows(r.stdout).slice(1);
    expect(table.map((row) => row.slice(0, 4)).sort((a, b) => a[1].localeCompare(b[1]))).toEqual([
      [fired.critical.id, 'critical', 'firing', 'orders sync failed'],
      [fired.warning.id, 'warning', 'firing', 'any run failed'],
    ]);
    for (const row of table) {
      expect(row[4]).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/);
      expect(row[5]).toMatch(/^Connector "orders-db": run \S+ failed: Host unreachable/);
    }
  });

  test('--severity and --status filter; --output json is the alerts as the API returns them', async () => {
    const [critical, warningJson, resolved] = await Promise.all([
      dpctl('list', '--project', 'ops', '--severity', 'critical'),
      dpctl('list', '--project', 'ops', '--severity', 'warning', '--status', 'firing', '--output', 'json'),
      dpctl('list', '--project', 'ops', '--status', 'resolved'),
    ]);
    expect(critical.code, critical.stderr).toBe(0);
    expect(
      rows(critical.stdout)
        .slice(1)
        .map((row) => row[0]),
    ).toEqual([fired.critical.id]);
    expect(warningJson.code, warningJson.stderr).toBe(0);
    expect(JSON.parse(warningJson.stdout)).toEqual([fired.warning]);
    expect(resolved).toMatchObject({ code: 0, stdout: 'No alerts.\n', stderr: '' });
  });

  test('a project without alerts; an unknown project; a status outside the schema', async () => {
    const [quiet, json, unknown, badStatus] = await Promise.all([
      dpctl('list', '--project', 'quiet'),
      dpctl('list', '--project', 'quiet', '--output', 'json'),
      dpctl('list', '--project', 'nope'),
      dpctl('list', '--project', 'ops', '--status', 'closed'),
    ]);
    expect(quiet).toMatchObject({ code: 0, stdout: 'No alerts.\n' });
    expect(JSON.parse(json.stdout)).toEqual([]);
    expect(unknown).toMatchObject({ code: 1, stdout: '', stderr: 'dpctl: project "nope" not found\n' });
    expect(badStatus.code).toBe(1);
    expect(badStatus.stderr).toContain(
      "option '--status <status>' argument 'closed' is invalid. Allowed choices are firing, acknowledged, resolved, open.",
    );
  });
});

describe('dpctl alerts ack / resolve', () => {
  test('ack moves a firing alert to acknowledged, resolve to resolved; --status open is firing or acknowledged', async () => {
    const ack = await dpctl('ack', fired.critical.id, '--project', 'ops');
    expect(ack).toMatchObject({ code: 0, stdout: `alert ${fired.critical.id} acknowledged\n`, stderr: '' });
    const acknowledged = await dpctl('list', '--project', 'ops', '--status', 'acknowledged', '--output', 'json');
    expect(JSON.parse(acknowledged.stdout)).toMatchObject([
      { id: fired.critical.id, status: 'acknowledged', acknowledged_by: t.adminEmail },
    ]);

    const resolve = await dpctl('resolve', fired.warning.id, '--project', 'ops', '--output', 'json');
    expect(resolve.code, resolve.stderr).toBe(0);
    expect(JSON.parse(resolve.stdout)).toMatchObject({ id: fired.warning.id, status: 'resolved', resolved_by: t.adminEmail });

    const [open, resolved] = await Promise.all([
      dpctl('list', '--project', 'ops', '--status', 'open'),
      dpctl('list', '--project', 'ops', '--status', 'resolved'),
    ]);
    expect(
      rows(open.stdout)
        .slice(1)
        .map((row) => [row[0], row[2]]),
    ).toEqual([[fired.critical.id, 'acknowledged']]);
    expect(
      rows(resolved.stdout)
        .slice(1)
        .map((row) => [row[0], row[2]]),
    ).toEqual([[fired.warning.id, 'resolved']]);
    expect((await client.alerts(projectId).listAll({ status: 'resolved' })).map((a) => a.id)).toEqual([fired.warning.id]);
  });

  test("a transition the alert's state does not allow, an unknown alert, an alert of another project: exit 1 with the service's message", async () => {
    const [again, unknown, otherProject, noProject] = await Promise.all([
      dpctl('ack', fired.warning.id, '--project', 'ops'),
      dpctl('resolve', 'alr_missing', '--project', 'ops'),
      dpctl('resolve', fired.critical.id, '--project', 'quiet'),
      dpctl('ack', fired.critical.id, '--project', 'nope'),
    ]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^dpctl: .*HTTP 409 conflict/m);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^dpctl: .*HTTP 404 resource_not_found/m);
    expect(otherProject.code).toBe(1);
    expect(otherProject.stderr).toMatch(/^dpctl: .*HTTP 404 resource_not_found/m);
    expect(noProject).toMatchObject({ code: 1, stderr: 'dpctl: project "nope" not found\n' });
    // Nothing changed: the critical alert is still acknowledged.
    expect((await client.alerts(projectId).listAll({ status: 'acknowledged' })).map((a) => a.id)).toEqual([fired.critical.id]);
  });
});
