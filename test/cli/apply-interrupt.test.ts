import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DPCTL, runDpctl } from '../support/cli.js';
import { groupLeftAfter, groupMembers, spawnInGroup } from '../support/processes.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { cliEnvFor } from '../integration/engine/helpers.js';

/**
 * `dpctl apply` asked to stop: Ctrl-C (SIGINT), a cancelled CI job (SIGTERM), or under `npx` the
 * death of npm. The changes in flight finish, no more start, the summary says what was done, exit
 * 1; the next apply finishes the rest. It used to die between two writes on a signal, and under
 * `npx` a SIGTERM to npm alone left it applying on, re-parented to init.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const CHANNELS = 150;
let svc: TestService;
let pid: number | undefined;

beforeAll(async () => {
  svc = await startTestService({ rateLimit: 1_000_000 });
});
afterEach(() => {
  if (pid && groupMembers(pid).length) process.kill(-pid, 'SIGKILL');
  pid = undefined;
});
afterAll(async () => {
  await svc?.close();
});

/** A project of `channels` notification channels: an apply of channels + 1 creates (one at a time, with --concurrency 1). */
function config(project: string, channels = CHANNELS): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'dp-interrupt-')), project);
  mkdirSync(dir);
  const docs = [`apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: ${project}\nspec:\n  description: x\n`];
  for (let i = 0; i < channels; i++)
    docs.push(
      `apiVersion: dataplatform/v1\nkind: NotificationChannel\nmetadata:\n  name: ch-${i}\n  project: ${project}\nspec:\n  type: email\n  config: { email_addresses: [team@example.com] }\n`,
    );
  writeFileSync(join(dir, 'platform.yaml'), docs.join('---\n'));
  return dir;
}

/** Starts `command` in its own process group; `up` resolves once its stdout matches `ready`. */
function start(command: string, args: string[], env: Record<string, string>, ready: RegExp) {
  const started = spawnInGroup(command, args, { cwd: ROOT, env: { ...process.env, ...env } });
  pid = started.pid;
  const exited = new Promise<number | null>((r) => started.child.once('close', (code) => r(code)));
  const up = new Promise<void>((resolve, reject) => {
    started.child.stdout!.on('data', () => (ready.test(started.stdout()) ? resolve() : undefined));
    void exited.then(() => reject(new Error(`exited before ${ready}:\n${started.output()}`)));
  });
  return { pid: started.pid, up, exited, out: () => ({ stdout: started.stdout(), stderr: started.stderr() }) };
}

async function channelsOf(t: TestTenant, project: string): Promise<number> {
  const p = (await svc.ok<{ data: Array<{ id: string; name: string }> }>(t, 'GET', '/projects')).data.find((x) => x.name === project);
  if (!p) return 0;
  let n = 0;
  let cursor: string | undefined;
  do {
    const page = await svc.ok<{ data: unknown[]; next_cursor?: string }>(
      t,
      'GET',
      `/projects/${p.id}/notification-channels?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    );
    n += page.data.length;
    cursor = page.next_cursor;
  } while (cursor);
  return n;
}

describe('dpctl apply, stopped', () => {
  it('Ctrl-C: the change in flight finishes, none starts after it, exit 1; the next apply finishes the rest', async () => {
    const t = await svc.tenant();
    const dir = config('interrupted');
    const env = cliEnvFor(svc, t);
    const apply = start(
      process.execPath,
      [DPCTL, 'apply', dir, '--concurrency', '1'],
      env,
      /^\+ NotificationChannel interrupted\/ch-2: created/m,
    );
    await apply.up;
    process.kill(apply.pid, 'SIGINT');
    expect(await apply.exited).toBe(1);
    const { stdout, stderr } = apply.out();
    expect(stderr).toContain('dpctl: interrupted (SIGINT): finishing the changes in flight, starting no more (again to exit at once)');
    expect(stderr).toContain('dpctl: the apply was stopped: what it wrote is on the server; what it had not started, and the provisioning');
    const summary = stdout.match(/Apply incomplete: (\d+) done, 0 failed, (\d+) skipped, 0 not supported\./);
    expect(summary, stdout).not.toBeNull();
    const [done, skipped] = [Number(summary![1]), Number(summary![2])];
    expect(done + skipped).toBe(CHANNELS + 1);
    expect(skipped).toBeGreaterThan(0);
    // What the summary says was done is what the server has: the project and done - 1 channels.
    expect(await channelsOf(t, 'interrupted')).toBe(done - 1);

    const again = await runDpctl(['apply', dir], { env });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain(`Apply complete: ${skipped} done, 0 failed, 0 skipped`);
    expect(await channelsOf(t, 'interrupted')).toBe(CHANNELS);
  }, 60_000);

  it('under npx, a SIGTERM to npm alone stops it too: nothing of it left running, nothing applied after', async () => {
    const t = await svc.tenant();
    // Enough creates that the apply is still at work half a second (the parent check) after npm is gone.
    const dir = config('npx-stopped', 1_500);
    const apply = start(
      'npx',
      ['dpctl', 'apply', dir, '--concurrency', '1'],
      { ...cliEnvFor(svc, t), npm_config_update_notifier: 'false' },
      /^\+ NotificationChannel npx-stopped\/ch-2: created/m,
    );
    await apply.up;
    process.kill(apply.pid, 'SIGTERM');
    expect(await groupLeftAfter(apply.pid, 8_000), `still running 8 s after the signal:\n${apply.out().stdout}`).toEqual([]);
    const created = await channelsOf(t, 'npx-stopped');
    expect(created).toBeLessThan(1_500);
    // Nothing more arrives later: the apply is gone, not merely detached.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await channelsOf(t, 'npx-stopped')).toBe(created);
  }, 60_000);

  it('dpctl run --follow under npx: a SIGTERM to npm alone ends the wait (the run goes on in the service)', async () => {
    const t = await svc.tenant();
    const p = await svc.project(t, 'runs');
    // A simulated sync of many tables: it lasts seconds at the service's real time scale.
    const tables = Array.from({ length: 40 }, (_, i) => `T${i}`);
    await svc.ok(
      t,
      'POST',
      `/projects/${p.id}/connectors`,
      { body: { name: 'crm', connector_type: 'salesforce', selected_tables: tables } },
      201,
    );
    const follow = start(
      'npx',
      ['dpctl', 'run', 'sync', 'crm', '--project', 'runs', '--follow'],
      { ...cliEnvFor(svc, t), npm_config_update_notifier: 'false' },
      /run \S+ started/,
    );
    await follow.up;
    process.kill(follow.pid, 'SIGTERM');
    expect(await groupLeftAfter(follow.pid, 8_000), `still following 8 s after the signal:\n${follow.out().stdout}`).toEqual([]);
    expect(follow.out().stderr).toMatch(/no longer following run \S+ \(it goes on in the service\)/);
  }, 60_000);
});
