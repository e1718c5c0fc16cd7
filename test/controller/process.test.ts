import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DPCTL } from '../support/cli.js';
import { signBody } from '../../src/controller/index.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { cliEnvFor, EXAMPLE, SECRET_ENV } from '../integration/engine/helpers.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { TestRepo, waitFor } from './helpers.js';

/**
 * `dpctl controller` as users run it: the built binary, credentials from the environment and
 * a mounted password file, JSON logs on stdout, signals.
 */
const WEBHOOK_SECRET = 'process-test-webhook-secret';

let svc: TestService;
/**
 * The mid-apply tests talk to the service through this proxy, which holds every create for a
 * while: on a fast machine the 25 creates of the example otherwise finish before a signal
 * sent after the third one arrives, and there would be nothing in flight to interrupt.
 */
let slow: FaultProxy;
beforeAll(async () => {
  svc = await startTestService();
  slow = await FaultProxy.start(svc);
  slow.rule = ({ method, path }) => (method === 'POST' && path.startsWith('/api/v1/projects') ? { delayMs: 150 } : 'forward');
});
afterAll(async () => {
  await slow?.close();
  await svc?.close();
});

interface Controller {
  child: ChildProcess;
  url: Promise<string>;
  logs: () => Record<string, any>[];
  raw: () => string;
  exited: Promise<number | null>;
}

/** Starts `dpctl controller` with the listener on a free port; resolves its URL from the log. */
function startController(args: string[], env: Record<string, string>): Controller {
  const child = spawn(process.execPath, [DPCTL, 'controller', '--listen', '127.0.0.1:0', '--interval', '1s', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const logs = () =>
    out
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        try {
          return JSON.parse(l) as Record<string, any>;
        } catch {
          throw new Error(`not a JSON log line: ${l}`);
        }
      });
  const url = waitFor(
    'the status listener',
    () => logs().find((l) => l.msg === 'status listener up')?.url as string | undefined,
    20_000,
    () => ({ out, err }),
  );
  return { child, url, logs, raw: () => out + err, exited };
}

async function status(c: Controller): Promise<any> {
  return (await fetch(`${await c.url}/status`)).json();
}

/** Every (collection, name) of the analytics and marketing projects, with how often it occurs. */
async function inventory(t: TestTenant): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  const add = (k: string) => counts.set(k, (counts.get(k) ?? 0) + 1);
  const projects = (await svc.ok(t, 'GET', '/projects', { query: { limit: 100 } })).data;
  for (const p of projects) {
    add(`project ${p.name}`);
    for (const c of [
      'connectors',
      'dbt-projects',
      'pipelines',
      'alert-rules',
      'notification-channels',
      'escalation-policies',
      'classifications',
      'masking-policies',
      'infrastructure',
    ]) {
      const list = (await svc.ok(t, 'GET', `/projects/${p.id}/${c}`, { query: { limit: 100 } })).data;
      for (const x of list) add(`${c} ${p.name}/${x.name}`);
    }
  }
  for (const u of (await svc.ok(t, 'GET', '/users', { query: { limit: 100 } })).data) add(`user ${u.email}`);
  return counts;
}

/**
 * Env for a password login whose password comes from a file, as from a mounted Secret;
 * `throughSlowProxy` points the controller at the proxy that holds creates.
 */
function credentials(t: TestTenant, throughSlowProxy = false): { env: Record<string, string>; passwordFile: string } {
  const dir = mkdtempSync(join(tmpdir(), 'dp-ctl-secret-'));
  const passwordFile = join(dir, 'password');
  writeFileSync(passwordFile, `${t.adminPassword}\n`);
  const { DATAPLATFORM_PASSWORD: _drop, ...env } = cliEnvFor(svc, t);
  if (throughSlowProxy) env.DATAPLATFORM_URL = `https://${t.slug}.localhost:${slow.port}`;
  return { env: { ...env, DPCTL_WEBHOOK_SECRET: WEBHOOK_SECRET }, passwordFile };
}

const secretValues = (t: TestTenant) => [t.adminPassword, WEBHOOK_SECRET, ...Object.values(SECRET_ENV)];

describe('dpctl controller process', () => {
  test(
    'kill -9 in the middle of an apply, restart: converges with no duplicates, reusing the saved refresh token',
    { timeout: 90_000 },
    async () => {
      const t = await svc.tenant();
      const repo = new TestRepo();
      const rev = repo.addExample('platform').commit('the platform');
      const stateDir = mkdtempSync(join(tmpdir(), 'dp-ctl-state-'));
      const { env, passwordFile } = credentials(t, true);
      const args = [
        '--source',
        repo.remote,
        '--path',
        'platform',
        '--state-dir',
        stateDir,
        '--password-file',
        passwordFile,
        '--concurrency',
        '1',
      ];

      const first = startController(args, env);
      await first.url;
      // Some creates are done, more are to come: kill it without warning.
      await waitFor(
        'a few creates',
        () => first.logs().filter((l) => /^\+ .*: created/.test(l.msg ?? '')).length >= 3,
        30_000,
        () => first.raw().slice(-2000),
      );
      first.child.kill('SIGKILL');
      expect(await first.exited).toBeNull();
      const partial = await inventory(t);
      expect(partial.size).toBeLessThan(25);
      // The rotated refresh token was kept, owner-only.
      const tokens = join(stateDir, 'tokens.json');
      expect(existsSync(tokens)).toBe(true);
      expect(statSync(tokens).mode & 0o777).toBe(0o600);

      const second = startController(args, env);
      try {
        await waitFor(
          'a converged run',
          async () => {
            const s = await status(second);
            return s.last_run?.result === 'converged' && s.last_run.revision === rev && s;
          },
          60_000,
          () => second.raw().slice(-3000),
        );
        const after = await inventory(t);
        expect(
          [...after.values()].every((n) => n === 1),
          `duplicates: ${[...after].filter(([, n]) => n > 1).map(([k]) => k)}`,
        ).toBe(true);
        // 25 declared resources, plus the tenant's admin user that existed before.
        expect(after.size).toBe(26);
        // No new login: the restart used the saved tokens.
        const metrics = await (await fetch(`${await second.url}/metrics`)).text();
        expect(metrics).not.toMatch(/dpctl_controller_api_calls_total\{endpoint="POST \/auth\/login"\} [1-9]/);
        for (const secret of secretValues(t)) expect(first.raw() + second.raw()).not.toContain(secret);
      } finally {
        second.child.kill('SIGTERM');
        await second.exited;
        repo.close();
      }
    },
  );

  test(
    'a plain directory source; SIGTERM mid-apply finishes the change in flight, starts no more, exits 0',
    { timeout: 60_000 },
    async () => {
      const t = await svc.tenant();
      const dir = join(mkdtempSync(join(tmpdir(), 'dp-ctl-dir-')), 'platform');
      cpSync(EXAMPLE, dir, { recursive: true });
      const { env, passwordFile } = credentials(t, true);
      const args = [
        '--source',
        dir,
        '--state-dir',
        mkdtempSync(join(tmpdir(), 'dp-ctl-state-')),
        '--password-file',
        passwordFile,
        '--concurrency',
        '1',
      ];
      const c = startController(args, env);
      await waitFor(
        'a few creates',
        () => c.logs().filter((l) => /^\+ .*: created/.test(l.msg ?? '')).length >= 2,
        30_000,
        () => c.raw().slice(-2000),
      );
      c.child.kill('SIGTERM');
      expect(await c.exited).toBe(0);
      const logs = c.logs();
      const msgs = logs.map((l) => l.msg as string);
      expect(msgs).toEqual(expect.arrayContaining(['controller started', 'shutting down', 'stopped']));
      // With one change at a time, at most the one in flight completes after the signal.
      const after = msgs.slice(msgs.indexOf('shutting down')).filter((m) => /^\+ .*: created/.test(m));
      expect(after.length).toBeLessThanOrEqual(1);
      expect(logs.find((l) => l.msg === 'reconcile run')).toMatchObject({ result: 'stopped' });
      expect(logs.every((l) => typeof l.level === 'number' && typeof l.time === 'number')).toBe(true);
      const created = msgs.filter((m) => /^\+ .*: created/.test(m)).length;
      expect((await inventory(t)).size).toBe(created + 1);

      // Started again, it finishes the job.
      const again = startController(args, env);
      try {
        const s = await waitFor(
          'a converged run',
          async () => {
            const s = await status(again);
            return s.last_run?.result === 'converged' && s;
          },
          60_000,
          () => again.raw().slice(-3000),
        );
        expect(s.controller.source).toBe(`directory ${dir}`);
        expect(s.controller.source_id).toBe('platform');
        expect(s.revision.applied.id).toMatch(/^sha256:[0-9a-f]{16}$/);
        expect((await fetch(`${await again.url}/readyz`)).status).toBe(200);
        const inv = await inventory(t);
        expect(inv.size).toBe(26);
        expect([...inv.values()].every((n) => n === 1)).toBe(true);
      } finally {
        again.child.kill('SIGTERM');
        expect(await again.exited).toBe(0);
      }
      for (const secret of secretValues(t)) expect(c.raw() + again.raw()).not.toContain(secret);
    },
  );

  test(
    'DPCTL_LOG_FORMAT=pretty: one human-readable line per entry; a run that changes nothing is not logged at info',
    { timeout: 60_000 },
    async () => {
      const t = await svc.tenant();
      const dir = join(mkdtempSync(join(tmpdir(), 'dp-ctl-dir-')), 'platform');
      cpSync(EXAMPLE, dir, { recursive: true });
      const { env, passwordFile } = credentials(t);
      const child = spawn(
        process.execPath,
        [
          DPCTL,
          'controller',
          '--listen',
          '127.0.0.1:0',
          '--interval',
          '1s',
          '--source',
          dir,
          '--state-dir',
          mkdtempSync(join(tmpdir(), 'dp-ctl-state-')),
          '--password-file',
          passwordFile,
        ],
        {
          env: { ...process.env, ...env, DPCTL_LOG_FORMAT: 'pretty' },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let out = '';
      child.stdout!.on('data', (d) => (out += d));
      const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
      try {
        const url = await waitFor(
          'the status listener',
          () => out.match(/status listener up url=(\S+)/)?.[1],
          20_000,
          () => out,
        );
        await waitFor(
          'a converged run',
          async () => (await (await fetch(`${url}/status`)).json()).last_run?.result === 'converged',
          30_000,
          () => out.slice(-2000),
        );
        const { runs } = await (await fetch(`${url}/status`)).json();
        // At 1 s intervals: several idle runs, none logged at info but (at most) the first after the apply.
        await new Promise((r) => setTimeout(r, 4_000));
        expect((await (await fetch(`${url}/status`)).json()).runs - runs).toBeGreaterThanOrEqual(3);
      } finally {
        child.kill('SIGTERM');
      }
      expect(await exited).toBe(0);
      const lines = out.trim().split('\n');
      for (const line of lines) expect(line).toMatch(/^\d\d:\d\d:\d\d\.\d{3} (DEBUG|INFO |WARN |ERROR|FATAL) controller: \S/);
      expect(lines).toContainEqual(
        expect.stringMatching(/ INFO  controller: \+ Project analytics: created \(prj_\S+\) revision=sha256:[0-9a-f]{16}$/),
      );
      expect(lines).toContainEqual(
        expect.stringMatching(
          / INFO  controller: reconcile run trigger=start revision=sha256:\S+ result=converged duration_ms=\d+ summary=\{"create":[1-9]\d*,/,
        ),
      );
      // The plan's warnings follow the run that had them (the secrets it wrote, without DPCTL_FINGERPRINT_KEY), once.
      expect(lines.filter((l) => / WARN  controller: plan warnings revision=\S+ warnings=\[".*get an unkeyed fingerprint/.test(l))).toHaveLength(1);
      // The start's run, and at most the next one (it finds nothing left to do: a new summary).
      expect(lines.filter((l) => l.includes('reconcile run')).length).toBeLessThanOrEqual(2);
      for (const secret of secretValues(t)) expect(out).not.toContain(secret);
    },
  );

  test(
    'two replicas with a lock: one leads; a webhook sent to the standby reaches it; when it stops, the standby takes over',
    { timeout: 60_000 },
    async () => {
      const t = await svc.tenant();
      const repo = new TestRepo();
      repo.addExample('platform').commit('the platform');
      const lock = join(mkdtempSync(join(tmpdir(), 'dp-ctl-lock-')), 'leader.lock');
      const { env, passwordFile } = credentials(t);
      const replica = (name: string) =>
        startController(
          [
            '--source',
            repo.remote,
            '--path',
            'platform',
            '--state-dir',
            mkdtempSync(join(tmpdir(), 'dp-ctl-state-')),
            '--password-file',
            passwordFile,
            '--leader-election',
            'lock',
            '--lock-file',
            lock,
            '--lease-seconds',
            '2',
            '--identity',
            name,
          ],
          env,
        );
      const a = replica('replica-a');
      await waitFor(
        'a leading',
        async () => (await status(a)).controller.leader.elected,
        20_000,
        () => a.raw().slice(-2000),
      );
      const b = replica('replica-b');
      try {
        await b.url;
        // b waits; it never runs while a leads.
        await new Promise((r) => setTimeout(r, 2_500));
        const sb = await status(b);
        expect(sb.controller.leader).toMatchObject({ elected: false, identity: 'replica-b' });
        expect(sb.runs).toBe(0);
        expect((await status(a)).controller.leader).toMatchObject({ elected: true, identity: 'replica-a' });
        // The leader advertises its listener (port 0 resolved); a webhook sent to the standby reaches it.
        expect(a.logs().find((l) => l.msg === 'controller started')?.advertise_url).toBe(await a.url);
        const body = '{"ref":"refs/heads/main"}';
        const hook = await fetch(`${await b.url}/hooks/git`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-github-event': 'push', 'x-hub-signature-256': signBody(WEBHOOK_SECRET, body) },
          body,
        });
        expect(hook.status).toBe(202);
        await waitFor(
          'a run of the leader triggered by the webhook',
          async () => (await status(a)).last_run?.trigger === 'webhook (push)',
          15_000,
          () => a.raw().slice(-2000),
        );
        expect(b.logs().some((l) => l.msg === 'forwarded to the leader' && l.status === 202)).toBe(true);
        expect((await status(b)).runs).toBe(0);
        a.child.kill('SIGTERM');
        expect(await a.exited).toBe(0);
        await waitFor(
          'b leading and converged',
          async () => {
            const s = await status(b);
            return s.controller.leader.elected && s.last_run?.result === 'converged';
          },
          30_000,
          () => b.raw().slice(-2000),
        );
        const after = await inventory(t);
        expect([...after.values()].every((n) => n === 1)).toBe(true);
      } finally {
        a.child.kill('SIGTERM');
        b.child.kill('SIGTERM');
        await Promise.all([a.exited, b.exited]);
        repo.close();
      }
    },
  );
});
