import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TestHttp } from '../support/http.js';
import { groupLeftAfter, groupMembers } from '../support/processes.js';

/**
 * The README's start command (`npm start`): the reference service with the demo tenant and the
 * controller reconciling examples/platform in one process. The test runs the package.json
 * script's own command line, with a free port, a temporary data dir and a copy of the examples
 * (so that it can edit a file the way a newcomer would).
 */
const ROOT = join(import.meta.dirname, '..', '..');
const work = mkdtempSync(join(tmpdir(), 'dp-start-'));
const examples = join(work, 'platform');
let child: ReturnType<typeof spawn>;
let stderr = '';
let stdout = '';
let api: string;
let statusUrl: string;
let http: TestHttp;
let token: string;

function startCommand(): string[] {
  const script: string = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.start;
  const [node, ...args] = script.split(/\s+/);
  expect(node).toBe('node');
  // Later options win in commander: a free port, a throwaway data dir and listener, the copy.
  // The log level is the script's default: the test checks how much it writes.
  return [...args, '--port', '0', '--data-dir', join(work, 'data'), '--controller-listen', '127.0.0.1:0', '--reconcile', examples];
}

const status = async () => (await fetch(statusUrl)).json() as Promise<any>;

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${stderr}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The environment of a newcomer's shell: no secrets or bootstrap settings of ours leak into the demo. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of Object.keys(env)) if (/_PASSWORD$|_SECRET$|_WEBHOOK_URL$|^DP_BOOTSTRAP_/.test(name)) delete env[name];
  return env;
}

beforeAll(async () => {
  cpSync(join(ROOT, 'examples', 'platform'), examples, { recursive: true });
  // stdout is a pipe, no terminal: JSON log lines.
  child = spawn(process.execPath, startCommand(), { cwd: ROOT, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  await until('the start banner', async () => (/Status: +http/.test(stderr) ? true : undefined));
  api = stderr.match(/API: +(https:\/\/\S+)/)![1];
  statusUrl = stderr.match(/Status: +(http:\/\/\S+)/)![1];
  http = new TestHttp(stderr.match(/CA file: +(\S+)/)![1]);
  const login = await http.call('POST', `${api}/auth/login`, { body: { email: 'admin@demo.local', password: 'demo-password' } });
  expect(login.status).toBe(200);
  token = login.body.access_token;
}, 60_000);

afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }
  await http?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('npm start', () => {
  it('prints where the API, the docs and the controller status are, and converges on the examples', async () => {
    expect(stderr).toMatch(/Docs: +https:\/\/demo\.localhost:\d+\/api\/docs/);
    expect(stderr).toContain(`Controller: reconciling ${examples} into tenant "demo"`);
    const converged = await until('the first converged run', async () => {
      const s = await status();
      return s.last_run?.result === 'converged' || s.last_run?.result === 'in-sync' ? s : undefined;
    });
    expect(converged.revision.invalid).toBeNull();
    expect(converged.resources.every((r: { state: string }) => r.state === 'applied' || r.state === 'in-sync')).toBe(true);
    const projects = await http.call('GET', `${api}/projects?limit=100`, { token });
    expect(projects.body.data.map((p: { name: string }) => p.name).sort()).toEqual(['analytics', 'marketing']);
  });

  /**
   * Before, every run of the in-process controller (every ~2 s) wrote ~22 lines: one per request of
   * its own polling, each at info, and its "reconcile run" line: ~100 lines in 10 s, and the banner
   * scrolled away. Now requests that succeed are debug and a run that changes nothing is debug:
   * once converged, 10 s add nothing (at most one "reconcile run" line, when the run after the
   * first apply finds nothing left to do), so 3 leaves room for a stray line but not for a run's worth.
   */
  it('is quiet once converged: no request lines, no reconcile line per idle run', async () => {
    await until('the first converged run', async () => ((await status()).last_run?.result === 'converged' ? true : undefined));
    const lines = () => stdout.split('\n').filter(Boolean);
    const before = lines().length;
    const runsBefore = (await status()).runs;
    await new Promise((r) => setTimeout(r, 10_000));
    const added = lines().slice(before);
    // Runs went on meanwhile (every 2 s), without a line each.
    expect((await status()).runs - runsBefore).toBeGreaterThanOrEqual(3);
    expect(added.length, added.join('\n')).toBeLessThan(3);
    const all = lines().map((l) => JSON.parse(l));
    expect(all.filter((l) => l.msg === 'request')).toEqual([]);
    expect(all.every((l) => l.level >= 30)).toBe(true);
    // What the start did is there: the revision, each create, the converged run.
    expect(all.map((l) => l.msg)).toEqual(expect.arrayContaining(['new revision', 'reconcile run']));
    expect(all.filter((l) => /^\+ .*: created/.test(l.msg)).length).toBeGreaterThan(10);
  });

  it('applies an edit of a YAML file within a few seconds', async () => {
    const file = join(examples, 'projects.yaml');
    const text = readFileSync(file, 'utf8');
    const edited = text.replace(
      'description: Company-wide reporting warehouse and its pipelines.',
      'description: Edited by the start test',
    );
    expect(edited).not.toBe(text);
    writeFileSync(file, edited);
    const started = Date.now();
    const project = await until('the edit to be applied', async () => {
      const list = await http.call('GET', `${api}/projects?limit=100`, { token });
      const p = list.body.data.find((x: { name: string }) => x.name === 'analytics');
      return p?.description === 'Edited by the start test' ? p : undefined;
    });
    expect(project.name).toBe('analytics');
    expect(Date.now() - started).toBeLessThan(15_000);
    // An applied change is logged at info, with the run that applied it.
    const logged = () =>
      stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l));
    await until(
      'the run that applied it in the log',
      async () => (logged().some((l) => l.msg === 'reconcile run' && l.summary?.update >= 1) ? true : undefined),
      10_000,
    );
    expect(logged().find((l) => /^~ Project analytics: updated/.test(l.msg))).toMatchObject({ level: 30 });
  });

  it('stops on SIGTERM with exit code 0', async () => {
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});

/** How a connection to the port ends: 'ECONNREFUSED' once nothing listens on it. */
const connectOutcome = (port: number) =>
  new Promise<string>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });

/**
 * Stopping `npm start` as people do: Ctrl-C in its terminal (SIGINT to the whole foreground process
 * group) and `kill <npm pid>` from a process manager, an IDE's stop button or a CI step (SIGTERM to npm
 * alone; npm forwards it to the `sh -c` running the script, which on dash neither execs node nor passes
 * the signal on). Either way nothing of it may outlive npm by more than a moment: no process left in the
 * group, the port free for the next `npm start`, the SQLite store closed (its WAL checkpointed away).
 */
describe('stopping npm start', () => {
  let npm: ChildProcess | undefined;
  let agent: TestHttp | undefined;
  let dir: string | undefined;

  afterEach(async () => {
    // A failed run must not leave a server behind for the rest of the suite.
    if (npm?.pid && groupMembers(npm.pid).length) process.kill(-npm.pid, 'SIGKILL');
    await agent?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    npm = agent = dir = undefined;
  });

  async function stopAndCheck(stop: (npmPid: number) => void): Promise<void> {
    dir = mkdtempSync(join(tmpdir(), 'dp-stop-'));
    const dataDir = join(dir, 'data');
    // `npm start -- ...` appends to the script's own options and the later ones win (commander):
    // port 0 so that parallel tests never collide (the banner says which port it got), a throwaway data dir.
    npm = spawn('npm', ['start', '--', '--port', '0', '--data-dir', dataDir, '--controller-listen', '127.0.0.1:0', '--log-level', 'warn'], {
      cwd: ROOT,
      env: { ...cleanEnv(), npm_config_update_notifier: 'false' },
      // Its own process group (as a shell gives a foreground job), so a signal reaches only npm's tree.
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const pid = npm.pid!;
    let output = '';
    npm.stdout!.on('data', (d) => (output += d));
    npm.stderr!.on('data', (d) => (output += d));
    const exited = new Promise<NodeJS.Signals | number | null>((resolve) => npm!.once('exit', (code, signal) => resolve(signal ?? code)));

    const deadline = Date.now() + 40_000;
    while (!/Status: +http/.test(output)) {
      if (Date.now() > deadline || npm.exitCode !== null) throw new Error(`npm start did not come up\n${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const port = Number(output.match(/listening on https:\/\/[^\s:]+:(\d+)/)![1]);
    agent = new TestHttp(output.match(/CA file: +(\S+)/)![1]);
    // The service answers (and the client keeps its connection open, as a browser tab would).
    const login = await agent.call('POST', `${output.match(/API: +(https:\/\/\S+)/)![1]}/auth/login`, {
      body: { email: 'admin@demo.local', password: 'demo-password' },
    });
    expect(login.status).toBe(200);

    const stoppedAt = Date.now();
    stop(pid);
    const timeout = new Promise<'still running'>((r) => setTimeout(() => r('still running'), 5_000));
    expect(await Promise.race([exited, timeout])).not.toBe('still running');

    // npm may exit a moment before the service has closed: it waits only for the shell.
    const left = await groupLeftAfter(pid, 8_000 - (Date.now() - stoppedAt));
    expect(left, `processes of npm start still running 8 s after the signal\n${output}`).toEqual([]);
    expect(await connectOutcome(port)).toBe('ECONNREFUSED');
    expect(output).toMatch(/draining in-flight requests and closing the store/);
    // Closed, not killed: the last connection's close checkpoints the WAL into the database and removes it.
    expect(existsSync(join(dataDir, 'dataplatform.sqlite-wal'))).toBe(false);
    const db = new Database(join(dataDir, 'dataplatform.sqlite'));
    try {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    } finally {
      db.close();
    }
  }

  it('stops on SIGTERM to the npm process alone', () => stopAndCheck((pid) => process.kill(pid, 'SIGTERM')), 60_000);

  it('stops on Ctrl-C (SIGINT to the process group)', () => stopAndCheck((pid) => process.kill(-pid, 'SIGINT')), 60_000);
});
