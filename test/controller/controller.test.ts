import { mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { reconcile } from '../../src/engine/index.js';
import { provisionProject } from '../../src/client/index.js';
import { kind } from '../../src/kinds/index.js';
import { DirectorySource, signBody, type RunningController } from '../../src/controller/index.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { clientFor, copyExample, SECRET_ENV } from '../integration/engine/helpers.js';
import { gitSourceOf, startTestController, TestRepo, waitFor } from './helpers.js';

/**
 * The controller in-process against the real service over HTTPS, following a real git
 * repository (a bare remote in a temp dir, pushed to from a work clone).
 */
const SECRET = 'webhook-secret-for-tests';
const env = { ...process.env, ...SECRET_ENV };

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => {
  await svc?.close();
});

/** `GET /projects/{analytics}/<collection>` item by name, as an admin sees it through the API. */
async function find(t: TestTenant, collection: string, name: string): Promise<any> {
  const projects = await svc.ok(t, 'GET', '/projects');
  const analytics = projects.data.find((p: any) => p.name === 'analytics');
  if (!analytics) return undefined;
  const list = await svc.ok(t, 'GET', `/projects/${analytics.id}/${collection}`, { query: { limit: 100 } });
  return list.data.find((x: any) => x.name === name);
}

async function patchByHand(t: TestTenant, collection: string, name: string, body: Record<string, unknown>) {
  const projects = await svc.ok(t, 'GET', '/projects');
  const analytics = projects.data.find((p: any) => p.name === 'analytics').id;
  const item = await find(t, collection, name);
  await svc.ok(t, 'PATCH', `/projects/${analytics}/${collection}/${item.id}`, { body });
}

const http = (ctl: RunningController, path: string, init: RequestInit = {}) => fetch(`${ctl.url}${path}`, init);

/** Prometheus text: every sample line is `name{labels} value`; returns the samples. */
function parseMetrics(text: string): { name: string; labels: string; value: number }[] {
  const out: { name: string; labels: string; value: number }[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (-?[0-9.e+-]+|NaN|\+Inf|-Inf)$/.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${line}`);
    out.push({ name: m[1], labels: m[2] ?? '', value: Number(m[3]) });
  }
  return out;
}
const sum = (samples: ReturnType<typeof parseMetrics>, name: string) =>
  samples.filter((s) => s.name === name).reduce((n, s) => n + s.value, 0);

describe('apply mode, following a git branch', () => {
  let t: TestTenant;
  let repo: TestRepo;
  let ctl: RunningController;
  let good: string;

  beforeAll(async () => {
    t = await svc.tenant();
    repo = new TestRepo();
    good = repo.addExample('platform').write('README.md', 'not YAML, ignored\n').commit('the platform');
    ctl = await startTestController({
      source: gitSourceOf(repo.remote),
      client: clientFor(svc, t),
      mode: 'apply',
      intervalMs: 1_000,
      engine: { sourceId: 'platform', concurrency: 4 },
      listen: { host: '127.0.0.1', port: 0 },
      webhookSecret: SECRET,
    });
  });
  afterAll(async () => {
    await ctl?.stop();
    repo?.close();
  });

  const converged = (rev: string) =>
    waitFor(
      `a converged run of ${rev.slice(0, 8)}`,
      () => ctl.status().last_run?.result === 'converged' && ctl.status().last_run?.revision === rev && ctl.status(),
      60_000,
      () => ctl.status().last_run,
    );

  test('commit config: it is applied; /readyz turns ready; the status lists every resource', async () => {
    const status = await converged(good);
    expect(status.revision.applied).toMatchObject({ id: good, summary: 'the platform' });
    expect(status.revision.converged).toMatchObject({ id: good, summary: 'the platform' });
    expect(status.resources).toHaveLength(25);
    expect(status.resources.every((r) => r.state === 'applied' || r.state === 'in-sync')).toBe(true);
    expect((await find(t, 'connectors', 'orders-db')).labels['dpctl.dev/managed-by']).toBe('platform');
    expect((await http(ctl, '/readyz')).status).toBe(200);
    expect(await (await http(ctl, '/healthz')).json()).toEqual({ status: 'ok' });
    // The next run finds nothing to do.
    await waitFor('an in-sync run', () => ctl.status().resources.every((r) => r.state === 'in-sync'));
  });

  test('commit a change: it is applied', async () => {
    const rev = repo
      .write(
        'platform/analytics/transform.yaml',
        (await import('node:fs'))
          .readFileSync(join(repo.work, 'platform/analytics/transform.yaml'), 'utf8')
          .replace('schedule: "0 2 * * *"', 'schedule: "0 4 * * *"'),
      )
      .commit('pipeline at 4');
    await converged(rev);
    expect((await find(t, 'pipelines', 'nightly-revenue')).schedule).toBe('0 4 * * *');
    good = rev;
  });

  test('drift made by hand is corrected within an interval', async () => {
    await patchByHand(t, 'connectors', 'orders-db', { schedule: '5 * * * *' });
    const started = Date.now();
    await waitFor(
      'the connector schedule back to the config',
      async () => (await find(t, 'connectors', 'orders-db')).schedule === '0 * * * *',
      10_000,
    );
    // One interval (1 s, plus jitter) and the run itself.
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  test('an invalid commit is not applied: the last good revision stays in force, the status shows file:line:column', async () => {
    const path = 'platform/analytics/transform.yaml';
    const text = (await import('node:fs')).readFileSync(join(repo.work, path), 'utf8');
    // A valid change and a broken file in one commit: nothing of it may reach the platform.
    repo
      .write(path, text.replace('schedule: "0 4 * * *"', 'schedule: "0 6 * * *"'))
      .write(
        'platform/analytics/broken.yaml',
        'apiVersion: dataplatform/v1\nkind: Connector\nmetadata:\n  name: x\n  project: analytics\nspec: [unclosed\n',
      );
    const bad = repo.commit('broken');
    const status = await waitFor(
      'the invalid revision reported',
      () => ctl.status().revision.invalid?.id === bad && ctl.status().last_run?.result === 'invalid' && ctl.status(),
    );
    expect(status.revision.applied?.id).toBe(good);
    expect(status.revision.converged?.id).toBe(good);
    expect(status.revision.invalid!.errors[0]).toMatch(/^platform\/analytics\/broken\.yaml:\d+:\d+: /);
    expect(status.last_run!.errors[0]).toBe(status.revision.invalid!.errors[0]);
    const page = await (await http(ctl, '/status', { headers: { accept: 'text/html' } })).text();
    expect(page).toContain('platform/analytics/broken.yaml:');
    // Several runs later, the last good revision is still what is applied.
    const runs = ctl.status().runs;
    await waitFor('two more runs', () => ctl.status().runs >= runs + 2);
    expect((await find(t, 'pipelines', 'nightly-revenue')).schedule).toBe('0 4 * * *');
    const metrics = parseMetrics(await (await http(ctl, '/metrics')).text());
    expect(sum(metrics, 'dpctl_controller_invalid_revisions_total')).toBe(1);
    expect(metrics.find((s) => s.name === 'dpctl_controller_applied_revision_info')?.labels).toContain(`revision="${good}"`);
    expect(metrics.find((s) => s.name === 'dpctl_controller_converged_revision_info')?.labels).toContain(`revision="${good}"`);

    // The fix is applied.
    good = repo.remove('platform/analytics/broken.yaml').commit('fix');
    await converged(good);
    expect((await find(t, 'pipelines', 'nightly-revenue')).schedule).toBe('0 6 * * *');
    expect(ctl.status().revision.invalid).toBeNull();
  });

  test("a commit cannot make the controller read its own files or credentials: such a revision is invalid, nothing of it applied", async () => {
    const outside = mkdtempSync(join(tmpdir(), 'dp-ctl-outside-'));
    writeFileSync(join(outside, 'id_ed25519'), 'deploy-key-material\n');
    writeFileSync(join(outside, 'extra.yaml'), 'apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: extra\n');
    const path = 'platform/analytics/sources.yaml';
    const text = readFileSync(join(repo.work, path), 'utf8');
    expect(text).toContain('env: ORDERS_DB_PASSWORD');
    repo.write(path, text.replace('env: ORDERS_DB_PASSWORD', 'env: DATAPLATFORM_API_KEY').replace('env: BILLING_DB_PASSWORD', `file: ${join(outside, 'id_ed25519')}`));
    symlinkSync(join(outside, 'extra.yaml'), join(repo.work, 'platform', 'extra.yaml'));
    const bad = repo.commit('exfiltrate');
    try {
      const status = await waitFor('the revision refused', () => ctl.status().revision.invalid?.id === bad && ctl.status());
      expect(status.revision.invalid!.errors).toEqual([
        expect.stringMatching(/^platform\/extra\.yaml: is a symbolic link out of the repository \(to .*extra\.yaml\): not read$/),
        expect.stringMatching(/^platform\/analytics\/sources\.yaml:\d+:\d+: Connector\/orders-db: spec\.credentials\.password: environment variable DATAPLATFORM_API_KEY is refused/),
        expect.stringMatching(/^platform\/analytics\/sources\.yaml:\d+:\d+: Connector\/billing-db: spec\.credentials\.password: file .*id_ed25519 is refused: it leads outside the repository/),
      ]);
      expect(JSON.stringify(status)).not.toContain('deploy-key-material');
      expect(status.revision.applied?.id).toBe(good);
      expect((await svc.ok(t, 'GET', '/projects')).data.map((p: { name: string }) => p.name)).not.toContain('extra');
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
    repo.write(path, text).remove('platform/extra.yaml');
    good = repo.commit('no exfiltration');
    await converged(good);
  });

  test('a commit that moves the --path directory away is an invalid revision, not a fetch error: the last good one stays, Ready is False', async () => {
    renameSync(join(repo.work, 'platform'), join(repo.work, 'config'));
    const moved = repo.commit('platform/ moved to config/');
    try {
      const status = await waitFor(
        'the revision refused',
        () => ctl.status().revision.invalid?.id === moved && ctl.status().last_run?.result === 'invalid' && ctl.status(),
      );
      expect(status.revision.invalid!.errors).toEqual(['platform: no such file or directory']);
      expect(status.revision.fetch_error).toBeNull();
      expect(status.revision.applied?.id).toBe(good);
      expect(status.conditions.find((c) => c.type === 'Ready')).toMatchObject({ status: 'False', reason: 'InvalidRevision' });
    } finally {
      renameSync(join(repo.work, 'config'), join(repo.work, 'platform'));
    }
    good = repo.commit('platform/ back');
    await converged(good);
  });

  test('suspend and resume over HTTP (bearer or HMAC), without a restart', async () => {
    const refused = await http(ctl, '/suspend', { method: 'POST' });
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({ error: { code: 'unauthorized' } });
    expect((await http(ctl, '/suspend', { method: 'POST', headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    const ok = await http(ctl, '/suspend', { method: 'POST', headers: { authorization: `Bearer ${SECRET}` } });
    expect(await ok.json()).toEqual({ suspended: true });
    expect(ctl.status().controller.suspended).toBe(true);
    // A run in flight when suspending may still finish: wait for it, then change by hand.
    await new Promise((r) => setTimeout(r, 1_500));
    await patchByHand(t, 'connectors', 'orders-db', { schedule: '7 * * * *' });
    await new Promise((r) => setTimeout(r, 3_000));
    expect((await find(t, 'connectors', 'orders-db')).schedule).toBe('7 * * * *');
    const body = '{}';
    const resumed = await http(ctl, '/resume', { method: 'POST', body, headers: { 'x-hub-signature-256': signBody(SECRET, body) } });
    expect(await resumed.json()).toEqual({ suspended: false });
    await waitFor(
      'the drift corrected after resume',
      async () => (await find(t, 'connectors', 'orders-db')).schedule === '0 * * * *',
      10_000,
    );
  });

  test('/metrics parses and moves; /status JSON; unknown routes answer the error envelope', async () => {
    const metrics = async () => parseMetrics(await (await http(ctl, '/metrics')).text());
    const before = await metrics();
    const runs = ctl.status().runs;
    await waitFor('a run', () => ctl.status().runs > runs);
    // Every resource in sync after a run; a resource can be caught progressing by the run before
    // (under load, 24 of 25 once), so the next runs are waited for until all are.
    const inSync = (m: typeof before) => m.find((s) => s.name === 'dpctl_controller_resources' && s.labels === '{state="in-sync"}')?.value;
    const after = await waitFor('25 resources in sync', async () => {
      const m = await metrics();
      return inSync(m) === 25 ? m : undefined;
    }, 10_000);
    expect(sum(after, 'dpctl_controller_api_calls_total')).toBeGreaterThan(sum(before, 'dpctl_controller_api_calls_total'));
    expect(sum(after, 'dpctl_controller_reconcile_duration_seconds_count')).toBeGreaterThan(
      sum(before, 'dpctl_controller_reconcile_duration_seconds_count'),
    );
    expect(after.find((s) => s.name === 'dpctl_controller_api_calls_total' && s.labels.includes('GET /projects"'))?.value).toBeGreaterThan(
      0,
    );
    expect(after.find((s) => s.name === 'dpctl_controller_applied_revision_info')?.labels).toContain(`revision="${good}"`);
    expect(after.find((s) => s.name === 'dpctl_controller_leader')?.value).toBe(1);

    const res = await http(ctl, '/status');
    expect(res.headers.get('content-type')).toContain('application/json');
    const status = await res.json();
    expect(status).toMatchObject({
      controller: { mode: 'apply', source_id: 'platform', suspended: false, ready: true, leader: { elected: true } },
      revision: { applied: { id: good } },
    });
    expect(status.resources.find((r: any) => r.name === 'orders-db')).toMatchObject({
      kind: 'connector',
      project: 'analytics',
      state: 'in-sync',
      id: expect.stringMatching(/^con_/),
    });
    expect(JSON.stringify(status)).not.toContain('orders-pw-1');

    const missing = await http(ctl, '/nope');
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { code: 'not_found' } });
    expect((await http(ctl, '/status', { method: 'DELETE' })).status).toBe(405);
  });
});

describe('drift mode, woken by the webhook', () => {
  let t: TestTenant;
  let repo: TestRepo;
  let ctl: RunningController;

  beforeAll(async () => {
    t = await svc.tenant();
    repo = new TestRepo();
    repo.addExample('platform').commit('the platform');
    // Applied once by hand (dpctl apply); the controller only watches.
    const client = clientFor(svc, t);
    await reconcile(client, [copyExample()], { sourceId: 'platform', env });
    // ... and provisioned, as dpctl apply does: otherwise its warehouse would be progressing (pending) for ever.
    await provisionProject(client, kind('infrastructure_resource'), (await client.projects.findByName('analytics'))!.id, {
      deadline: Date.now() + 30_000,
    });
    await client.close();
    ctl = await startTestController({
      source: gitSourceOf(`file://${repo.remote}`),
      client: clientFor(svc, t),
      mode: 'drift',
      // An hour: anything that happens within the test was woken by the webhook.
      intervalMs: 3_600_000,
      listen: { host: '127.0.0.1', port: 0 },
      webhookSecret: SECRET,
    });
    await waitFor('the first run', () => ctl.status().last_run, 30_000);
  });
  afterAll(async () => {
    await ctl?.stop();
    repo?.close();
  });

  const hook = (body: string, headers: Record<string, string>) =>
    http(ctl, '/hooks/git', {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json', 'x-github-event': 'push', ...headers },
    });

  test('the first run finds the platform in sync', () => {
    expect(ctl.status().last_run).toMatchObject({ result: 'in-sync', trigger: 'start' });
    expect(ctl.status().drift).toEqual([]);
  });

  test('a bad or missing signature is refused with 401 and triggers nothing', async () => {
    const body = JSON.stringify({ ref: 'refs/heads/main' });
    const runs = ctl.status().runs;
    const none = await hook(body, {});
    expect(none.status).toBe(401);
    expect(await none.json()).toMatchObject({ error: { code: 'unauthorized', message: expect.stringContaining('X-Hub-Signature-256') } });
    expect((await hook(body, { 'x-hub-signature-256': signBody('another-secret', body) })).status).toBe(401);
    // Signed over a different body.
    expect((await hook(body, { 'x-hub-signature-256': signBody(SECRET, `${body} `) })).status).toBe(401);
    await new Promise((r) => setTimeout(r, 500));
    expect(ctl.status().runs).toBe(runs);
  });

  test('drift made by hand is reported, not corrected', async () => {
    await patchByHand(t, 'connectors', 'orders-db', { schedule: '9 * * * *' });
    const body = JSON.stringify({ ref: 'refs/heads/main' });
    const runs = ctl.status().runs;
    expect((await hook(body, { 'x-hub-signature-256': signBody(SECRET, body) })).status).toBe(202);
    const status = await waitFor('a drift run', () => ctl.status().runs > runs && ctl.status(), 20_000);
    expect(status.last_run).toMatchObject({ result: 'drift', trigger: 'webhook (push)' });
    expect(status.drift).toEqual([
      expect.objectContaining({
        type: 'changed',
        kind: 'connector',
        name: 'orders-db',
        detail: 'schedule',
        fields: [{ field: 'schedule', before: '9 * * * *', after: '0 * * * *' }],
      }),
    ]);
    expect(status.resources.find((r) => r.name === 'orders-db')).toMatchObject({ state: 'drifted', detail: 'schedule' });
    expect((await find(t, 'connectors', 'orders-db')).schedule).toBe('9 * * * *');
    const metrics = parseMetrics(await (await http(ctl, '/metrics')).text());
    expect(metrics.find((s) => s.name === 'dpctl_controller_drift_count')?.value).toBe(1);
  });

  test('a signed webhook fetches a new commit at once (the interval is an hour)', async () => {
    const rev = repo
      .write(
        'platform/extra.yaml',
        'apiVersion: dataplatform/v1\nkind: Classification\nmetadata:\n  name: from-git\n  project: analytics\nspec:\n  sensitivity: internal\n',
      )
      .commit('a classification');
    const body = JSON.stringify({ ref: 'refs/heads/main', after: rev });
    const sent = Date.now();
    expect((await hook(body, { 'x-hub-signature-256': signBody(SECRET, body) })).status).toBe(202);
    const status = await waitFor(
      'the new revision fetched',
      () => ctl.status().revision.applied?.id === rev && ctl.status().last_run?.revision === rev && ctl.status(),
      20_000,
    );
    expect(Date.now() - sent).toBeLessThan(10_000);
    // Drift mode: the new classification is reported as missing, not created.
    expect(status.drift.map((d) => `${d.type} ${d.name}`).sort()).toEqual(['changed orders-db', 'deleted from-git']);
    expect(await find(t, 'classifications', 'from-git')).toBeUndefined();
  });
});

/** A controller in apply mode with --prune (source id `platform`) following `repo`, every 500 ms. */
const pruningController = (t: TestTenant, repo: TestRepo) =>
  startTestController({
    source: gitSourceOf(repo.remote),
    client: clientFor(svc, t),
    mode: 'apply',
    intervalMs: 500,
    engine: { sourceId: 'platform', prune: true },
  });

describe('--prune, with the mass-delete guard', () => {
  let t: TestTenant;
  let repo: TestRepo;
  let ctl: RunningController;

  beforeAll(async () => {
    t = await svc.tenant();
    repo = new TestRepo();
    repo.addExample('platform').commit('the platform');
    ctl = await pruningController(t, repo);
  });
  afterAll(async () => {
    await ctl?.stop();
    repo?.close();
  });

  test('a removed file is pruned; removing more than the guard allows is refused and deletes nothing', { timeout: 60_000 }, async () => {
    await waitFor(
      'a converged run',
      () => ctl.status().last_run?.result === 'converged',
      60_000,
      () => ctl.status().last_run,
    );
    expect(await find(t, 'classifications', 'pii-email')).toBeDefined();

    // 4 resources leave the config: pruned.
    const pruned = repo.remove('platform/analytics/governance.yaml').commit('no governance');
    await waitFor(
      'the prune applied',
      () => ctl.status().last_run?.revision === pruned && ctl.status().last_run?.result === 'converged',
      20_000,
      () => ctl.status().last_run,
    );
    expect(await find(t, 'classifications', 'pii-email')).toBeUndefined();
    expect(await find(t, 'masking-policies', 'hash-emails')).toBeUndefined();

    // 6 more (over max(5, 20%)): refused, and nothing is deleted.
    const mass = repo.remove('platform/marketing').commit('no marketing resources');
    const status = await waitFor(
      'the guard',
      () => ctl.status().last_run?.revision === mass && ctl.status().last_run?.result === 'plan-error' && ctl.status(),
      20_000,
      () => ctl.status().last_run,
    );
    expect(status.last_run!.errors.join('\n')).toMatch(/refusing to delete 6 of \d+ managed resources/);
    expect(status.resources.filter((r) => r.action === 'delete').every((r) => r.state === 'pending')).toBe(true);
    const projects = await svc.ok(t, 'GET', '/projects');
    const marketing = projects.data.find((p: any) => p.name === 'marketing');
    expect((await svc.ok(t, 'GET', `/projects/${marketing.id}/connectors`)).data.length).toBeGreaterThan(0);
  });
});

describe('--prune of a project that holds what the source does not manage', () => {
  let t: TestTenant;
  let repo: TestRepo;
  let ctl: RunningController;
  const doc = (kind: string, name: string, spec: string, project?: string) =>
    `apiVersion: dataplatform/v1\nkind: ${kind}\nmetadata:\n  name: ${name}\n${project ? `  project: ${project}\n` : ''}spec:\n${spec}`;
  const channel = (name: string) => doc('NotificationChannel', name, `  type: email\n  config:\n    email_addresses: [${name}@example.com]\n`, 'hr');

  beforeAll(async () => {
    t = await svc.tenant();
    repo = new TestRepo();
    repo
      .write('platform/main.yaml', doc('Project', 'main', '  description: stays\n'))
      .write('platform/hr.yaml', [doc('Project', 'hr', '  description: goes\n'), channel('hr-alerts')].join('---\n'))
      .commit('two projects');
    ctl = await pruningController(t, repo);
  });
  afterAll(async () => {
    await ctl?.stop();
    repo?.close();
  });

  test('the project is kept with a warning on /status and its managed channel pruned; once the other one is gone, the project is pruned', { timeout: 60_000 }, async () => {
    await waitFor('a converged run', () => ctl.status().last_run?.result === 'converged', 30_000, () => ctl.status().last_run);
    const hr = (await svc.ok(t, 'GET', '/projects')).data.find((p: any) => p.name === 'hr');
    // Made by hand in the project: this source does not manage it.
    const byHand = await svc.ok(t, 'POST', `/projects/${hr.id}/notification-channels`, {
      body: { name: 'hr-by-hand', type: 'email', config: { email_addresses: ['hr@example.com'] } },
    });
    const removed = repo.remove('platform/hr.yaml').commit('no hr');
    const status = await waitFor(
      'the run of the commit',
      () => ctl.status().last_run?.revision === removed && ctl.status().last_run?.result === 'converged' && ctl.status(),
      20_000,
      () => ctl.status().last_run,
    );
    expect(status.last_run!.warnings).toEqual([
      expect.stringMatching(/^Project hr is not pruned: it holds 1 resource this source does not manage \(NotificationChannel hr-by-hand\)/),
    ]);
    expect(status.recent_runs[0]).toMatchObject({ warning_count: 1 });
    const channels = async () =>
      (await svc.ok(t, 'GET', `/projects/${hr.id}/notification-channels`)).data.map((c: any) => c.name).sort();
    expect(await channels()).toEqual(['hr-by-hand']);

    // Deleted by hand: the next run prunes the project.
    await svc.ok(t, 'DELETE', `/projects/${hr.id}/notification-channels/${byHand.id}`);
    await waitFor(
      'the project pruned',
      async () => !(await svc.ok(t, 'GET', '/projects')).data.some((p: any) => p.name === 'hr'),
      20_000,
      () => ctl.status().last_run,
    );
    expect(ctl.status().last_run?.warnings ?? []).toEqual([]);
  });
});

describe('a plain directory source (git-sync, npm start)', () => {
  let t: TestTenant;
  let dir: string;
  let ctl: RunningController;

  beforeAll(async () => {
    t = await svc.tenant();
    dir = copyExample();
    ctl = await startTestController({
      source: new DirectorySource(dir, { snapshotDir: join(mkdtempSync(join(tmpdir(), 'dp-ctl-state-')), 'dir') }),
      client: clientFor(svc, t),
      mode: 'apply',
      intervalMs: 500,
      engine: { sourceId: 'platform', concurrency: 4 },
    });
  });
  afterAll(async () => {
    await ctl?.stop();
  });

  test(
    'an invalid edit is not applied and the last good revision stays in force: drift is still corrected',
    { timeout: 60_000 },
    async () => {
      const good = (
        await waitFor(
          'a converged run',
          () => ctl.status().last_run?.result === 'converged' && ctl.status(),
          60_000,
          () => ctl.status().last_run,
        )
      ).revision.applied!.id;
      const transform = join(dir, 'analytics/transform.yaml');
      const text = readFileSync(transform, 'utf8');
      // A valid change and a broken file at once: nothing of it may reach the platform.
      writeFileSync(transform, text.replace('schedule: "0 2 * * *"', 'schedule: "0 6 * * *"'));
      writeFileSync(
        join(dir, 'analytics/broken.yaml'),
        'apiVersion: dataplatform/v1\nkind: Connector\nmetadata:\n  name: x\n  project: analytics\nspec: [unclosed\n',
      );
      const status = await waitFor(
        'the invalid revision reported',
        () => ctl.status().revision.invalid && ctl.status().last_run?.result === 'invalid' && ctl.status(),
        20_000,
        () => ctl.status().last_run,
      );
      expect(status.revision.applied?.id).toBe(good);
      expect(status.revision.invalid!.errors[0]).toMatch(/^analytics\/broken\.yaml:\d+:\d+: /);

      // The revision in force is still reconciled: drift made by hand is corrected while the files are broken.
      await patchByHand(t, 'connectors', 'orders-db', { schedule: '5 * * * *' });
      await waitFor(
        'the connector schedule back to the last good revision',
        async () => (await find(t, 'connectors', 'orders-db')).schedule === '0 * * * *',
        10_000,
      );
      expect(ctl.status().last_run?.result).toBe('invalid');
      expect((await find(t, 'pipelines', 'nightly-revenue')).schedule).toBe('0 2 * * *');

      // Fixing the files applies the change.
      rmSync(join(dir, 'analytics/broken.yaml'));
      await waitFor(
        'the fix applied',
        async () => (await find(t, 'pipelines', 'nightly-revenue')).schedule === '0 6 * * *',
        20_000,
        () => ctl.status().last_run,
      );
      await waitFor(
        'a converged run of the fix',
        () => ctl.status().last_run?.result === 'converged' && ctl.status().revision.invalid === null,
        10_000,
        () => ctl.status().last_run,
      );
      expect(ctl.status().revision.applied?.id).not.toBe(good);
    },
  );
});
