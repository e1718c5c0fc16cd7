import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestHttp } from '../support/http.js';

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
let api: string;
let statusUrl: string;
let http: TestHttp;
let token: string;

function startCommand(): string[] {
  const script: string = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.start;
  const [node, ...args] = script.split(/\s+/);
  expect(node).toBe('node');
  // Later options win in commander: a free port, a throwaway data dir and listener, the copy.
  return [...args, '--port', '0', '--data-dir', join(work, 'data'), '--controller-listen', '127.0.0.1:0', '--reconcile', examples, '--log-level', 'warn'];
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

beforeAll(async () => {
  cpSync(join(ROOT, 'examples', 'platform'), examples, { recursive: true });
  const env = { ...process.env };
  for (const name of Object.keys(env)) if (/_PASSWORD$|_SECRET$|_WEBHOOK_URL$|^DP_BOOTSTRAP_/.test(name)) delete env[name];
  child = spawn(process.execPath, startCommand(), { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] });
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

  it('applies an edit of a YAML file within a few seconds', async () => {
    const file = join(examples, 'projects.yaml');
    const text = readFileSync(file, 'utf8');
    const edited = text.replace('description: Company-wide reporting warehouse and its pipelines.', 'description: Edited by the start test');
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
  });

  it('stops on SIGTERM with exit code 0', async () => {
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});
