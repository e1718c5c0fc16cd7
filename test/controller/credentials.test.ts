import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DPCTL } from '../support/cli.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { cliEnvFor } from '../integration/engine/helpers.js';
import { TestRepo, waitFor } from './helpers.js';

/**
 * `dpctl controller` with its credentials in mounted files (API key, webhook secret), and a git
 * remote over smart HTTP that wants a token in the URL, as a private repository would.
 */
let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => {
  await svc?.close();
});

const PROJECT_YAML = (description: string) => `apiVersion: dataplatform/v1
kind: Project
metadata:
  name: keyed
spec:
  description: ${description}
---
apiVersion: dataplatform/v1
kind: Classification
metadata:
  name: pii
  project: keyed
spec:
  sensitivity: confidential
`;

/** A secret file as a mounted Secret has it (with a trailing newline). */
function secretFile(value: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'dp-ctl-cred-')), 'value');
  writeFileSync(path, `${value}\n`);
  return path;
}

function run(args: string[], env: Record<string, string>) {
  const child = spawn(
    process.execPath,
    [
      DPCTL,
      'controller',
      '--listen',
      '127.0.0.1:0',
      '--interval',
      '1s',
      '--state-dir',
      mkdtempSync(join(tmpdir(), 'dp-ctl-state-')),
      ...args,
    ],
    {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const logs = () =>
    out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, any>);
  const url = waitFor(
    'the status listener',
    () => logs().find((l) => l.msg === 'status listener up')?.url as string | undefined,
    20_000,
    () => out,
  );
  const status = async () => (await fetch(`${await url}/status`)).json();
  const stop = async () => {
    child.kill('SIGTERM');
    return exited;
  };
  return { child, url, status, stop, exited, raw: () => out };
}

/** Env without any credential: each test adds the one it is about. */
function baseEnv(t: TestTenant): Record<string, string> {
  const { DATAPLATFORM_PASSWORD: _p, DATAPLATFORM_EMAIL: _e, ...env } = cliEnvFor(svc, t);
  return {
    ...env,
    DATAPLATFORM_API_KEY: '',
    DATAPLATFORM_API_KEY_FILE: '',
    DATAPLATFORM_PASSWORD_FILE: '',
    DPCTL_WEBHOOK_SECRET: '',
    DPCTL_WEBHOOK_SECRET_FILE: '',
  };
}

describe('credentials from mounted files', () => {
  let t: TestTenant;
  let key: string;
  let projectId: string;
  let configDir: string;

  beforeAll(async () => {
    t = await svc.tenant();
    // A project-scoped admin key manages the resources of its own project.
    projectId = (await svc.project(t, 'keyed')).id;
    key = (await svc.apiKey(t, projectId, 'admin')).key;
    configDir = join(mkdtempSync(join(tmpdir(), 'dp-ctl-keyed-')), 'keyed');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(configDir);
    writeFileSync(join(configDir, 'keyed.yaml'), PROJECT_YAML('managed with a key'));
  });

  test(
    '--api-key-file and --webhook-secret-file: converges, the webhook secret comes from its file, no secret in the logs',
    { timeout: 60_000 },
    async () => {
      const webhookSecret = 'webhook-secret-from-a-file';
      const c = run(
        ['--source', configDir, '--api-key-file', secretFile(key), '--webhook-secret-file', secretFile(webhookSecret)],
        baseEnv(t),
      );
      try {
        const s = await waitFor(
          'a converged run',
          async () => {
            const s = await c.status();
            return s.last_run?.result === 'converged' && s;
          },
          30_000,
          () => c.raw().slice(-2000),
        );
        expect(s.resources.map((r: any) => `${r.kind} ${r.name}`).sort()).toEqual(['classification pii', 'project keyed']);
        const project = await svc.ok(t, 'GET', `/projects/${projectId}`);
        expect(project.description).toBe('managed with a key');
        // The file's secret (without its newline) guards suspend; another one is refused.
        expect((await fetch(`${await c.url}/suspend`, { method: 'POST', headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
        const suspended = await fetch(`${await c.url}/suspend`, { method: 'POST', headers: { authorization: `Bearer ${webhookSecret}` } });
        expect(await suspended.json()).toEqual({ suspended: true });
      } finally {
        expect(await c.stop()).toBe(0);
      }
      expect(c.raw()).not.toContain(key);
      expect(c.raw()).not.toContain(webhookSecret);
    },
  );

  test('DATAPLATFORM_API_KEY_FILE works the same', { timeout: 60_000 }, async () => {
    await svc.ok(t, 'PATCH', `/projects/${projectId}`, { body: { description: 'changed by hand' } });
    const c = run(['--source', configDir], { ...baseEnv(t), DATAPLATFORM_API_KEY_FILE: secretFile(key) });
    try {
      await waitFor(
        'the drift corrected',
        async () => (await svc.ok(t, 'GET', `/projects/${projectId}`)).description === 'managed with a key',
        30_000,
        () => c.raw().slice(-2000),
      );
    } finally {
      expect(await c.stop()).toBe(0);
    }
    expect(c.raw()).not.toContain(key);
  });

  /** `dpctl controller --source <config> ...extra` run to its exit: the code and everything it printed. */
  const controllerExit = async (extra: string[]) => {
    const c = spawn(process.execPath, [DPCTL, 'controller', '--source', configDir, ...extra], {
      env: { ...process.env, ...baseEnv(t) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    c.stdout.on('data', (d) => (out += d));
    c.stderr.on('data', (d) => (out += d));
    return { code: await new Promise<number | null>((resolve) => c.once('close', resolve)), out };
  };

  test('an API key and a password file at once are refused before anything starts', async () => {
    const { code, out } = await controllerExit(['--api-key-file', secretFile(key), '--password-file', secretFile('pw')]);
    expect(code).toBe(1);
    expect(out).toContain('give either an API key or a password file, not both');
    expect(out).not.toContain(key);
  });

  test('settings that cannot work stop the start with what to pass: --prune without --source-id, a bad source id, a missing --secrets-dir', async () => {
    const [prune, empty, dir] = await Promise.all([
      controllerExit(['--prune']),
      controllerExit(['--source-id', '']),
      controllerExit(['--source-id', 'team-a', '--secrets-dir', '/nonexistent/dpctl/secrets']),
    ]);
    expect(prune.code).toBe(1);
    // Every repository made by `dpctl init` keeps its YAML in platform/: a default from the path collides.
    expect(prune.out).toContain("dpctl: --prune deletes what carries this controller's source id, so name it: --source-id <id>");
    expect(empty.code).toBe(1);
    expect(empty.out).toContain('dpctl: the source id is empty');
    expect(dir.code).toBe(1);
    expect(dir.out).toContain('dpctl: --secrets-dir /nonexistent/dpctl/secrets: no such directory');
    for (const r of [prune, empty, dir]) expect(r.out).not.toMatch(/\n\s+at /);
  });

  test('a missing credential file is named, with no stack trace', async () => {
    const { code, out } = await controllerExit(['--api-key-file', '/nonexistent/dpctl/key']);
    expect(code).toBe(1);
    expect(out).toMatch(/--api-key-file.*\/nonexistent\/dpctl\/key/);
    expect(out).not.toMatch(/\n\s+at /);
  });
});

/**
 * Git's smart HTTP protocol served by `git http-backend` (CGI) behind Basic auth: the token
 * must come from the URL, as for a private repository on a git host.
 */
class GitHttpServer {
  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(projectRoot: string, user: string, token: string): Promise<GitHttpServer> {
    const expected = `Basic ${Buffer.from(`${user}:${token}`).toString('base64')}`;
    const server = createServer((req, res) => {
      if (req.headers.authorization !== expected) {
        res.writeHead(401, { 'www-authenticate': 'Basic realm="git"' }).end('unauthorized');
        return;
      }
      const url = new URL(req.url!, 'http://localhost');
      const cgi = spawn('git', ['http-backend'], {
        env: {
          ...process.env,
          GIT_PROJECT_ROOT: projectRoot,
          GIT_HTTP_EXPORT_ALL: '1',
          REQUEST_METHOD: req.method!,
          PATH_INFO: url.pathname,
          QUERY_STRING: url.search.slice(1),
          CONTENT_TYPE: req.headers['content-type'] ?? '',
          REMOTE_USER: user,
          REMOTE_ADDR: '127.0.0.1',
          ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: String(req.headers['content-encoding']) } : {}),
          ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
        },
        stdio: ['pipe', 'pipe', 'ignore'],
      });
      req.pipe(cgi.stdin);
      // CGI output: headers, a blank line, the body.
      let head = Buffer.alloc(0);
      let started = false;
      cgi.stdout.on('data', (chunk: Buffer) => {
        if (started) return void res.write(chunk);
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        started = true;
        const headers: Record<string, string> = {};
        let status = 200;
        for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
          const i = line.indexOf(':');
          const name = line.slice(0, i).trim().toLowerCase();
          const value = line.slice(i + 1).trim();
          if (name === 'status') status = Number.parseInt(value, 10);
          else headers[name] = value;
        }
        res.writeHead(status, headers);
        res.write(head.subarray(end + 4));
      });
      cgi.stdout.on('end', () => res.end());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return new GitHttpServer(server, (server.address() as AddressInfo).port);
  }

  close() {
    this.server.closeAllConnections();
    return new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

describe('a git remote over HTTP with a token in the URL', () => {
  let t: TestTenant;
  let repo: TestRepo;
  let http: GitHttpServer;
  const TOKEN = 'ghp_token-from-the-url';

  beforeAll(async () => {
    t = await svc.tenant();
    repo = new TestRepo();
    repo.write('platform/keyed.yaml', PROJECT_YAML('from a private remote')).commit('one project');
    http = await GitHttpServer.start(repo.root, 'ci-bot', TOKEN);
  });
  afterAll(async () => {
    await http?.close();
    repo?.close();
  });

  test(
    'fetches and applies over HTTP; the token never shows in the logs or /status; a wrong token is a fetch error, redacted',
    { timeout: 60_000 },
    async () => {
      const env = { ...baseEnv(t), DATAPLATFORM_EMAIL: t.adminEmail, DATAPLATFORM_PASSWORD: t.adminPassword };
      const remote = (token: string) => `http://ci-bot:${token}@127.0.0.1:${http.port}/remote.git`;
      const c = run(['--source', remote(TOKEN), '--branch', 'main', '--path', 'platform'], env);
      try {
        const s = await waitFor(
          'a converged run',
          async () => {
            const s = await c.status();
            return s.last_run?.result === 'converged' && s;
          },
          30_000,
          () => c.raw().slice(-2000),
        );
        expect(s.controller.source).toBe(`git http://***@127.0.0.1:${http.port}/remote.git branch main path platform`);
        expect(s.revision.applied.summary).toBe('one project');
        const projects = await svc.ok(t, 'GET', '/projects');
        expect(projects.data.find((p: any) => p.name === 'keyed')?.description).toBe('from a private remote');
        expect(JSON.stringify(s)).not.toContain(TOKEN);
      } finally {
        expect(await c.stop()).toBe(0);
      }
      expect(c.raw()).not.toContain(TOKEN);

      const wrong = run(['--source', remote('wrong-token'), '--branch', 'main', '--path', 'platform'], env);
      try {
        const s = await waitFor(
          'the fetch error',
          async () => {
            const s = await wrong.status();
            return s.revision.fetch_error && s;
          },
          30_000,
          () => wrong.raw().slice(-2000),
        );
        expect(s.revision.fetch_error).toMatch(/^git fetch failed: /);
        expect(s.revision.fetch_error).toContain(`Authentication failed for 'http://127.0.0.1:${http.port}/remote.git/'`);
        expect(s.controller.source).not.toContain('wrong-token');
        expect(s.last_run?.result).toBe('error');
      } finally {
        expect(await wrong.stop()).toBe(0);
      }
      expect(wrong.raw()).not.toContain('wrong-token');
    },
  );
});
