import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DirectorySource, type RunningController } from '../../src/controller/index.js';
import { formatStatus, runAfter } from '../../src/controller/remote.js';
import type { ControllerStatus, RunRecord } from '../../src/controller/status.js';
import type { SuspensionStore } from '../../src/controller/suspension.js';
import type { LeaderElector } from '../../src/controller/leader/index.js';
import { DPCTL, runDpctl } from '../support/cli.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { clientFor, cliEnvFor } from '../integration/engine/helpers.js';
import { startTestController, waitFor } from './helpers.js';

/**
 * `dpctl controller status|suspend|resume|reconcile`: the built binary against a controller
 * started here (in-process) on a real service, and the suspension kept across a restart of
 * `dpctl controller` itself (the file store in its state directory).
 */
const SECRET = 'remote-test-secret';
let svc: TestService;
let t: TestTenant;
let ctl: RunningController;
const root = mkdtempSync(join(tmpdir(), 'dp-ctl-remote-'));
const dir = join(root, 'platform');
const secretFile = join(root, 'webhook-secret');

/** A project with a warehouse; `lakeRegion` adds an AWS bucket there (mars-1: the service refuses to provision it). */
const config = (lakeRegion?: string) =>
  [
    'apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: remote-ctl\nspec:\n  description: controller remote\n',
    'apiVersion: dataplatform/v1\nkind: InfrastructureResource\nmetadata:\n  name: wh\n  project: remote-ctl\nspec:\n  resource_type: warehouse\n  provider: snowflake\n  region: eu-west-1\n',
    ...(lakeRegion
      ? [
          `apiVersion: dataplatform/v1\nkind: InfrastructureResource\nmetadata:\n  name: lake\n  project: remote-ctl\nspec:\n  resource_type: bucket\n  provider: aws\n  region: ${lakeRegion}\n`,
        ]
      : []),
  ].join('---\n');

/** No controller URL or secret from the environment the tests run in: each test gives its own. */
const CLEAN_ENV = { DPCTL_CONTROLLER_URL: '', DPCTL_WEBHOOK_SECRET: '', DPCTL_WEBHOOK_SECRET_FILE: '' };
const dpctl = (args: string[], env: Record<string, string> = {}) => runDpctl(['controller', ...args], { env: { ...CLEAN_ENV, ...env } });

beforeAll(async () => {
  svc = await startTestService({ timeScale: 20 });
  t = await svc.tenant();
  mkdirSync(dir);
  writeFileSync(join(dir, 'platform.yaml'), config());
  writeFileSync(secretFile, `${SECRET}\n`);
  ctl = await startTestController({
    source: new DirectorySource(dir),
    client: clientFor(svc, t),
    mode: 'apply',
    // Runs only when asked here.
    intervalMs: 3_600_000,
    listen: { host: '127.0.0.1', port: 0 },
    webhookSecret: SECRET,
    backoff: { baseMs: 60_000, maxMs: 60_000 },
  });
  await waitFor(
    'the first run',
    () => ctl.status().last_run?.result === 'converged',
    60_000,
    () => ctl.status().last_run,
  );
});
afterAll(async () => {
  await ctl?.stop();
  await svc?.close();
});

describe('dpctl controller status|suspend|resume|reconcile against a running controller', () => {
  test("status: a table like flux get, and the controller's JSON; --url from DPCTL_CONTROLLER_URL too", async () => {
    const [text, json, fromEnv] = await Promise.all([
      dpctl(['status', '--url', ctl.url!]),
      dpctl(['status', '--url', ctl.url!, '--output', 'json']),
      dpctl(['status'], { DPCTL_CONTROLLER_URL: ctl.url! }),
    ]);
    expect(text.stderr).toBe('');
    expect(text.code).toBe(0);
    const lines = text.stdout.split('\n');
    expect(lines[0]).toMatch(/^NAME +READY +REASON +SUSPENDED +REVISION +CONVERGED +LAST RUN$/);
    const rev = ctl.status().revision.applied!.id.slice(0, 19);
    expect(lines[1]).toMatch(
      new RegExp(`^platform +True +Succeeded +False +${rev} +${rev} +converged \\d+ s ago, took [\\d.]+ (ms|s) \\(start\\)$`),
    );
    expect(text.stdout).toMatch(/^Leader: +pid \d+ \(this replica leads; none \(always leader\)\)$/m);
    expect(text.stdout).toMatch(/^Resources: +2 (applied|in-sync) \(2 declared\)$/m);
    expect(text.stdout).not.toContain('Problems:');

    expect(json.code).toBe(0);
    const s = JSON.parse(json.stdout) as ControllerStatus;
    expect(s.controller).toMatchObject({ source_id: 'platform', suspended: false, leader: { elected: true } });
    expect(s.last_run).toMatchObject({ result: 'converged', trigger: 'start' });
    expect(s.resources.map((r) => r.name).sort()).toEqual(['remote-ctl', 'wh']);
    expect(fromEnv.code).toBe(0);
    expect(fromEnv.stdout.split('\n')[1]).toMatch(/^platform +True +Succeeded /);
  });

  test('suspend and resume with the bearer secret; a wrong or missing secret exits 1 with a clear message', async () => {
    const [wrong, missing] = await Promise.all([
      dpctl(['suspend', '--url', ctl.url!], { DPCTL_WEBHOOK_SECRET: 'not-the-secret' }),
      dpctl(['suspend', '--url', ctl.url!]),
    ]);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toBe(
      'dpctl: the controller refused the webhook secret (401 unauthorized): check --webhook-secret-file, DPCTL_WEBHOOK_SECRET_FILE or DPCTL_WEBHOOK_SECRET\n',
    );
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("needs the controller's webhook secret: give --webhook-secret-file FILE");
    expect(ctl.status().controller.suspended).toBe(false);

    const suspend = await dpctl(['suspend', '--url', ctl.url!], { DPCTL_WEBHOOK_SECRET: SECRET });
    expect(suspend.stderr).toBe('');
    expect(suspend.code).toBe(0);
    expect(suspend.stdout).toMatch(/^suspended: /);
    expect(ctl.status().controller.suspended).toBe(true);
    const status = await dpctl(['status', '--url', ctl.url!]);
    expect(status.stdout.split('\n')[1]).toMatch(/^platform +Unknown +Suspended +True /);

    // A suspended controller starts no run: reconcile says so at once.
    const refused = await dpctl(['reconcile', '--url', ctl.url!, '--webhook-secret-file', secretFile]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('reconciling is suspended: resume it first');

    const runs = ctl.status().runs;
    const resume = await dpctl(['resume', '--url', ctl.url!, '--webhook-secret-file', secretFile, '--output', 'json']);
    expect(resume).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(resume.stdout)).toEqual({ suspended: false });
    expect(ctl.status().controller.suspended).toBe(false);
    await waitFor('the run after resume', () => ctl.status().runs > runs);
    expect(ctl.status().last_run?.trigger).toBe('resume');
  });

  test('no secret on the controller: 403 as a message; nobody listening: a message; exit 1', async () => {
    const bare = await startTestController({
      source: new DirectorySource(dir),
      client: clientFor(svc, t),
      mode: 'drift',
      intervalMs: 3_600_000,
      listen: { host: '127.0.0.1', port: 0 },
      suspended: true,
    });
    try {
      const r = await dpctl(['suspend', '--url', bare.url!], { DPCTL_WEBHOOK_SECRET: SECRET });
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        'dpctl: suspend is off on this controller (403 forbidden): it was started without a webhook secret (--webhook-secret-file, DPCTL_WEBHOOK_SECRET)\n',
      );
    } finally {
      await bare.stop();
    }
    const gone = await dpctl(['status', '--url', bare.url!]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(/^dpctl: cannot reach the controller at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/);
  });

  test('reconcile: triggers a run, waits for it and exits 0 when it converged (text and JSON)', async () => {
    const r = await dpctl(['reconcile', '--url', ctl.url!, '--webhook-secret-file', secretFile]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^reconcile requested \(\d{4}-.*Z\); waiting for the run \(up to 5m\)\n$/);
    expect(r.stdout).toMatch(
      /^run converged in [\d.]+ (ms|s) \(trigger reconcile, revision sha256:[0-9a-f]{12}, started .*\)\nplan: 2 unchanged\n$/,
    );
    expect(ctl.status().recent_runs[0]).toMatchObject({ trigger: 'reconcile', result: 'converged' });

    const json = await dpctl(['reconcile', '--url', ctl.url!, '--output', 'json'], { DPCTL_WEBHOOK_SECRET_FILE: secretFile });
    expect(json).toMatchObject({ code: 0, stderr: '' });
    const out = JSON.parse(json.stdout);
    expect(out.run).toMatchObject({ trigger: 'reconcile', result: 'converged', errors: [] });
    expect(Date.parse(out.run.started_at)).toBeGreaterThanOrEqual(Date.parse(out.requested_at));
  });

  test('reconcile exits 1 when the revision does not converge (a refused provisioning: degraded); status lists the problem', async () => {
    writeFileSync(join(dir, 'platform.yaml'), config('mars-1'));
    try {
      const r = await dpctl(['reconcile', '--url', ctl.url!, '--webhook-secret-file', secretFile, '--timeout', '2m']);
      expect(r.code).toBe(1);
      expect(r.stdout).toMatch(/^run degraded in /);
      expect(r.stdout).toMatch(/^1 error:\n  InfrastructureResource remote-ctl\/lake: degraded: .*aws has no region "mars-1"/m);
      const status = await dpctl(['status', '--url', ctl.url!]);
      expect(status.code).toBe(0);
      expect(status.stdout.split('\n')[1]).toMatch(
        /^platform +False +Degraded +False +sha256:[0-9a-f]{12} +sha256:[0-9a-f]{12} +degraded /,
      );
      expect(status.stdout).toMatch(/^Problems:\n  degraded  InfrastructureResource remote-ctl\/lake: .*mars-1/m);
    } finally {
      writeFileSync(join(dir, 'platform.yaml'), config());
    }
  });

  test('reconcile times out with exit 1 when no run finishes in time', async () => {
    // A controller whose run cannot finish quickly: a source that hangs.
    const hanging = await startTestController({
      source: {
        description: 'hanging',
        fetch: (signal) => new Promise((_, reject) => signal?.addEventListener('abort', () => reject(signal.reason))),
      },
      client: clientFor(svc, t),
      mode: 'apply',
      intervalMs: 3_600_000,
      listen: { host: '127.0.0.1', port: 0 },
      webhookSecret: SECRET,
    });
    try {
      const r = await dpctl(['reconcile', '--url', hanging.url!, '--timeout', '1s'], { DPCTL_WEBHOOK_SECRET: SECRET });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('dpctl: no run requested at ');
      expect(r.stderr).toContain('finished within 1s');
    } finally {
      await hanging.stop();
    }
  });
});

describe('which run answers a reconcile request', () => {
  const run = (trigger: string, started: string, result = 'converged'): RunRecord => ({
    trigger,
    started_at: started,
    finished_at: started,
    duration_ms: 1,
    result: result as RunRecord['result'],
    revision: 'r',
    summary: {},
    error_count: 0,
    first_error: null,
  });
  const status = (runs: RunRecord[]) => ({ recent_runs: runs, last_run: null }) as unknown as ControllerStatus;
  const asked = '2024-05-01T10:00:00.500Z';

  test('a run already under way when asked (another trigger, started before) does not count; the reconcile run after it does', () => {
    expect(runAfter(status([run('webhook (push)', '2024-05-01T10:00:00.100Z', 'degraded')]), asked)).toBeUndefined();
    expect(
      runAfter(
        status([run('reconcile', '2024-05-01T10:00:01.000Z'), run('webhook (push)', '2024-05-01T10:00:00.100Z', 'degraded')]),
        asked,
      ),
    ).toMatchObject({ trigger: 'reconcile', result: 'converged' });
    // Started in the same millisecond as the request: only a reconcile run counts.
    expect(runAfter(status([run('interval', asked)]), asked)).toBeUndefined();
    expect(runAfter(status([run('reconcile', asked)]), asked)).toMatchObject({ trigger: 'reconcile' });
    // A webhook that arrived meanwhile may take the pending trigger's place: its run started after the request, it counts.
    expect(runAfter(status([run('webhook (push)', '2024-05-01T10:00:02.000Z')]), asked)).toMatchObject({ trigger: 'webhook (push)' });
    // The oldest run after the request answers it, not a later one.
    expect(
      runAfter(status([run('interval', '2024-05-01T10:00:09.000Z', 'degraded'), run('reconcile', '2024-05-01T10:00:01.000Z')]), asked),
    ).toMatchObject({ result: 'converged' });
  });

  test('the status table of a standby and of a controller with problems', () => {
    const now = Date.parse('2024-05-01T10:01:00.000Z');
    const s = {
      controller: {
        mode: 'apply',
        source: 'git https://example.com/p.git branch main path platform',
        source_id: 'platform',
        interval_ms: 30_000,
        prune: false,
        suspended: false,
        ready: true,
        leader: { elected: false, identity: 'pod-b', election: 'lease dpctl/dpctl-controller' },
        started_at: '2024-05-01T09:00:00.000Z',
      },
      revision: {
        fetched: null,
        applied: { id: 'a'.repeat(40), summary: 'add lake', at: '' },
        converged: { id: 'b'.repeat(40), summary: null, at: '' },
        invalid: null,
        fetch_error: null,
        last_fetch_at: null,
      },
      last_run: {
        trigger: 'interval',
        started_at: '2024-05-01T10:00:00.000Z',
        finished_at: '2024-05-01T10:00:12.000Z',
        duration_ms: 12_000,
        result: 'degraded',
        revision: 'a'.repeat(40),
        summary: {},
        errors: [],
        warnings: ['Project q is not pruned: it holds 1 resource this source does not manage (Connector by-hand) ...'],
      },
      runs: 3,
      recent_runs: [],
      conditions: [{ type: 'Ready', status: 'False', reason: 'Degraded', message: 'lake is degraded', last_transition_time: '' }],
      resources: [
        { kind: 'project', yaml_kind: 'Project', project: null, name: 'p', id: 'x', action: 'no-op', state: 'in-sync', detail: null },
        {
          kind: 'infrastructure_resource',
          yaml_kind: 'InfrastructureResource',
          project: 'p',
          name: 'lake',
          id: 'y',
          action: 'no-op',
          state: 'degraded',
          detail: 'no region',
        },
        {
          kind: 'connector',
          yaml_kind: 'Connector',
          project: 'p',
          name: 'db',
          id: null,
          action: 'create',
          state: 'backoff',
          detail: 'backing off after 2 failures: 500',
          failures: 2,
          next_attempt_at: '2024-05-01T10:01:20.000Z',
        },
        {
          kind: 'connector',
          yaml_kind: 'Connector',
          project: 'p',
          name: 'old',
          id: 'z',
          action: 'delete',
          state: 'applied',
          detail: 'delete done',
        },
        // A delete the run did not make (a plan refused by the mass-delete guard): neither declared nor pruned.
        { kind: 'connector', yaml_kind: 'Connector', project: 'p', name: 'kept', id: 'w', action: 'delete', state: 'pending', detail: null },
      ],
      drift: [],
    } as unknown as ControllerStatus;
    expect(formatStatus(s, now)).toBe(
      [
        'NAME      READY  REASON    SUSPENDED  REVISION      CONVERGED     LAST RUN',
        'platform  False  Degraded  False      aaaaaaaaaaaa  bbbbbbbbbbbb  degraded 48 s ago, took 12.0 s (interval)',
        '',
        'Message:    lake is degraded',
        "Leader:     standby pod-b (lease dpctl/dpctl-controller): the leader's runs are in the leader's status",
        'Source:     git https://example.com/p.git branch main path platform (apply mode, every 30s)',
        'Revision:   aaaaaaaaaaaa add lake',
        // A pruned resource is not one of the declared.
        'Resources:  1 in-sync, 1 applied, 1 pending, 1 degraded, 1 backoff (3 declared, 1 pruned)',
        'Warnings:',
        '  Project q is not pruned: it holds 1 resource this source does not manage (Connector by-hand) ...',
        'Problems:',
        '  degraded  InfrastructureResource p/lake: no region',
        '  backoff   Connector p/db: backing off after 2 failures: 500 (attempt 3 in 20 s)',
        '',
      ].join('\n'),
    );
  });
});

describe('the controller and its suspension store', () => {
  /** A store in memory that records what it was asked. */
  const memoryStore = (initial?: boolean) => {
    const saved: boolean[] = [];
    let value = initial;
    return {
      saved,
      set: (v: boolean) => (value = v),
      store: {
        description: 'memory',
        load: async () => value,
        save: async (v: boolean) => void saved.push((value = v)),
      } satisfies SuspensionStore,
    };
  };

  test('a standby that becomes leader takes the suspension another replica stored; suspend and resume save it; a failing store is logged, not fatal', async () => {
    let lead: () => void = () => {};
    const elected = new Promise<void>((resolve) => (lead = resolve));
    let leading = false;
    const elector: LeaderElector = {
      description: 'test',
      identity: 'replica-2',
      acquire: async () => {
        await elected;
        leading = true;
      },
      isLeader: () => leading,
      onLost: () => {},
      release: async () => {
        leading = false;
      },
      leaderUrl: async () => undefined,
    };
    const m = memoryStore(false);
    const standby = await startTestController({
      source: new DirectorySource(dir),
      client: clientFor(svc, t),
      mode: 'apply',
      intervalMs: 3_600_000,
      elector,
      suspension: m.store,
    });
    try {
      expect(standby.status().controller.suspended).toBe(false);
      // The leader (another replica) suspends: stored. This replica then becomes leader and runs nothing.
      m.set(true);
      lead();
      await waitFor('leadership', () => standby.status().controller.leader.elected);
      expect(standby.status().controller.suspended).toBe(true);
      await new Promise((r) => setTimeout(r, 300));
      expect(standby.status().runs).toBe(0);
      standby.resume();
      await waitFor('the resume saved', () => m.saved.length === 1);
      expect(m.saved).toEqual([false]);
      await waitFor('the run after resume', () => standby.status().last_run?.trigger === 'resume', 30_000);
      standby.suspend();
      await waitFor('the suspend saved', () => m.saved.length === 2);
      expect(m.saved).toEqual([false, true]);
    } finally {
      await standby.stop();
    }

    // --suspend stores true; a store that fails is logged and the controller goes on.
    const started = memoryStore(undefined);
    const withFlag = await startTestController({
      source: new DirectorySource(dir),
      client: clientFor(svc, t),
      mode: 'apply',
      intervalMs: 3_600_000,
      suspended: true,
      suspension: started.store,
    });
    await withFlag.stop();
    expect(started.saved).toEqual([true]);
    const broken: SuspensionStore = {
      description: 'broken',
      load: async () => Promise.reject(new Error('disk on fire')),
      save: async () => Promise.reject(new Error('disk on fire')),
    };
    const survivor = await startTestController({
      source: new DirectorySource(dir),
      client: clientFor(svc, t),
      mode: 'apply',
      intervalMs: 3_600_000,
      suspension: broken,
    });
    try {
      await waitFor('a run despite the store', () => survivor.status().last_run, 30_000);
      survivor.suspend();
      expect(survivor.status().controller.suspended).toBe(true);
    } finally {
      await survivor.stop();
    }
  });
});

describe('suspension survives a restart of dpctl controller (file store in the state directory)', () => {
  test(
    'suspend, restart on the same state dir: it comes back suspended and runs nothing; resume, restart: it reconciles',
    { timeout: 90_000 },
    async () => {
      const stateDir = mkdtempSync(join(tmpdir(), 'dp-ctl-state-'));
      const env = { ...cliEnvFor(svc, t), ...CLEAN_ENV, DPCTL_WEBHOOK_SECRET_FILE: secretFile, DPCTL_LOG_FORMAT: 'json' };
      const start = () => {
        const child = spawn(
          process.execPath,
          [DPCTL, 'controller', '--source', dir, '--state-dir', stateDir, '--listen', '127.0.0.1:0', '--interval', '1h'],
          { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
        );
        let out = '';
        child.stdout!.on('data', (d) => (out += d));
        child.stderr!.on('data', (d) => (out += d));
        const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
        const url = waitFor(
          'the status listener',
          () => out.match(/"url":"(http:\/\/127\.0\.0\.1:\d+)","msg":"status listener up"/)?.[1],
          20_000,
          () => out,
        );
        return { url, exited, stop: () => (child.kill('SIGTERM'), exited), raw: () => out };
      };
      const json = async (url: string) =>
        JSON.parse((await dpctl(['status', '--url', url, '--output', 'json'])).stdout) as ControllerStatus;

      const first = start();
      const url1 = await first.url;
      await waitFor('the first run', async () => (await json(url1)).last_run, 30_000, first.raw);
      expect(await dpctl(['suspend', '--url', url1], env)).toMatchObject({ code: 0 });
      expect(JSON.parse(readFileSync(join(stateDir, 'suspended.json'), 'utf8'))).toMatchObject({ suspended: true });
      expect(await first.stop()).toBe(0);

      const second = start();
      try {
        const url2 = await second.url;
        const s = await json(url2);
        expect(s.controller.suspended).toBe(true);
        await new Promise((r) => setTimeout(r, 500));
        expect((await json(url2)).runs).toBe(0);
        expect(second.raw()).toContain('reconciling suspended (stored suspension)');
        expect(await dpctl(['resume', '--url', url2], env)).toMatchObject({ code: 0 });
        await waitFor('the run after resume', async () => (await json(url2)).last_run?.trigger === 'resume', 30_000, second.raw);
        expect(JSON.parse(readFileSync(join(stateDir, 'suspended.json'), 'utf8'))).toMatchObject({ suspended: false });
      } finally {
        expect(await second.stop()).toBe(0);
      }

      const third = start();
      try {
        const url3 = await third.url;
        await waitFor('a run after the restart', async () => (await json(url3)).last_run?.trigger === 'start', 30_000, third.raw);
        expect((await json(url3)).controller.suspended).toBe(false);
      } finally {
        await third.stop();
      }
      expect(existsSync(join(stateDir, 'suspended.json'))).toBe(true);
    },
  );
});
