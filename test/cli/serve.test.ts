import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync, spawn } from 'node:child_process';
import { connect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { TestHttp } from '../support/http.js';
import { DPCTL, startServe, runDpctl, type RunningCli } from '../support/cli.js';

const running: RunningCli[] = [];
const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'dp-cli-'));
  dirs.push(d);
  return d;
};
const serve = async (args: string[], env: Record<string, string> = {}) => {
  const r = await startServe(args, env);
  running.push(r);
  return r;
};
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.stop('SIGKILL')));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const BOOT = { DP_BOOTSTRAP_TENANT: 'acme', DP_BOOTSTRAP_EMAIL: 'Admin@Acme.test', DP_BOOTSTRAP_PASSWORD: 'bootstrap-pass-1' };

async function login(http: TestHttp, port: number, slug = 'acme', email = BOOT.DP_BOOTSTRAP_EMAIL, password = BOOT.DP_BOOTSTRAP_PASSWORD) {
  return http.call('POST', `https://${slug}.localhost:${port}/api/v1/auth/login`, { body: { email, password } });
}

/** Sends raw bytes and returns everything the server answers before closing. */
function rawExchange(port: number, payload: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(payload));
    let answer = '';
    socket.on('data', (d) => (answer += d));
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
  });
}

describe('dpctl serve start-up contract', () => {
  it('bootstraps the tenant, prints how to reach it, serves HTTPS with the CA in the data dir and keeps data across restarts', async () => {
    const dataDir = tempDir();
    const first = await serve(['--data-dir', dataDir], BOOT);
    expect(first.stderr()).toContain(`https://acme.localhost:${first.port}/api/v1`);
    expect(first.stderr()).toContain('/api/docs');
    const caFile = join(dataDir, 'tls', 'ca.pem');
    expect(existsSync(caFile)).toBe(true);
    expect(first.stderr()).toContain(caFile);
    const http = new TestHttp(caFile);
    const tokens = await login(http, first.port);
    expect(tokens.status).toBe(200);
    const created = await http.call('POST', `https://acme.localhost:${first.port}/api/v1/projects`, {
      token: tokens.body.access_token,
      body: { name: 'kept' },
    });
    expect(created.status).toBe(201);
    expect(await first.stop('SIGTERM')).toBe(0);

    // Same data dir, bootstrap again: nothing duplicated, nothing lost, the same CA still trusted.
    const second = await serve(['--data-dir', dataDir], BOOT);
    expect(second.stderr()).toContain('Tenant "acme" ready');
    const again = await login(http, second.port);
    const projects = await http.call('GET', `https://acme.localhost:${second.port}/api/v1/projects`, { token: again.body.access_token });
    expect(projects.body.data.map((p: { name: string }) => p.name)).toEqual(['kept']);
    const users = await http.call('GET', `https://acme.localhost:${second.port}/api/v1/users`, { token: again.body.access_token });
    expect(users.body.data).toHaveLength(1);
    expect(await second.stop('SIGTERM')).toBe(0);

    // Without DP_BOOTSTRAP_*: the banner names the tenant the database holds, not "No tenant bootstrapped".
    const third = await serve(['--data-dir', dataDir]);
    expect(third.stderr()).toContain(`Tenants:  1 in the database, https://acme.localhost:${third.port}/api/v1`);
    expect(third.stderr()).not.toContain('No tenant bootstrapped');
    await http.close();
  });

  it('refuses to start with DP_BOOTSTRAP_* half set, naming what is missing, before it writes anything', async () => {
    const dataDir = join(tempDir(), 'data');
    const r = await runDpctl(['serve', '--port', '0', '--data-dir', dataDir], {
      env: { DP_BOOTSTRAP_TENANT: 'acme', DP_BOOTSTRAP_EMAIL: 'admin@acme.test', DP_BOOTSTRAP_PASSWORD: '' },
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('DP_BOOTSTRAP_PASSWORD is not set, but DP_BOOTSTRAP_TENANT and DP_BOOTSTRAP_EMAIL are');
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(existsSync(dataDir)).toBe(false);
  });

  it('answers plain HTTP on the HTTPS port with a clear error in the spec envelope', async () => {
    const s = await serve(['--data-dir', tempDir()]);
    const answer = await rawExchange(s.port, 'GET /api/v1/projects HTTP/1.1\r\nHost: acme.localhost\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1.1 400/);
    expect(answer).toMatch(/x-request-id: req_/i);
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
    expect(body.error.code).toBe('validation_error');
    expect(body.error.message).toMatch(/only accepts HTTPS/);
  });

  it('drains an in-flight request on SIGTERM, then exits 0', async () => {
    const dataDir = tempDir();
    const s = await serve(['--data-dir', dataDir], BOOT);
    // Raw HTTPS so the request is certainly in flight at the server (headers and half the
    // body sent) when SIGTERM comes; the rest of the body follows after the signal.
    const body = JSON.stringify({ email: BOOT.DP_BOOTSTRAP_EMAIL, password: BOOT.DP_BOOTSTRAP_PASSWORD });
    const half = Math.floor(body.length / 2);
    const socket = tlsConnect({
      host: '127.0.0.1',
      port: s.port,
      servername: 'acme.localhost',
      ca: readFileSync(join(dataDir, 'tls', 'ca.pem')),
    });
    let answer = '';
    socket.on('data', (d) => (answer += d));
    const closed = new Promise((r) => socket.on('close', r));
    await new Promise((r) => socket.once('secureConnect', r));
    const head = `POST /api/v1/auth/login HTTP/1.1\r\nHost: acme.localhost:${s.port}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
    await new Promise((r) => socket.write(head + body.slice(0, half), r));
    await new Promise((r) => setTimeout(r, 250));
    const exit = s.stop('SIGTERM');
    await new Promise((r) => setTimeout(r, 100));
    socket.write(body.slice(half));
    await closed;
    expect(answer).toMatch(/^HTTP\/1.1 200/);
    expect(answer).toContain('access_token');
    expect(await exit).toBe(0);
    expect(s.stderr()).toContain('draining');
  });

  it('honours --rate-limit, --access-token-ttl and --strict-spec', async () => {
    const dataDir = tempDir();
    const s = await serve(['--data-dir', dataDir, '--rate-limit', '2', '--access-token-ttl', '120', '--strict-spec'], BOOT);
    const http = new TestHttp(join(dataDir, 'tls', 'ca.pem'));
    const tokens = await login(http, s.port);
    expect(tokens.body.expires_in).toBe(120);
    const base = `https://acme.localhost:${s.port}/api/v1`;
    const token = tokens.body.access_token;
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await http.call('GET', `${base}/users`, { token })).status);
    expect(statuses).toEqual([200, 200, 429]);
    const project = await http.call('POST', `${base}/projects`, { token, body: { name: 'p' } });
    expect((await http.call('GET', `${base}/projects/${project.body.id}/api-keys`, { token })).status).toBe(404);
    await http.close();
  });

  it('serves a given certificate with --tls-cert/--tls-key', async () => {
    const dir = tempDir();
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-days',
        '2',
        '-subj',
        '/CN=acme.localhost',
        '-addext',
        'subjectAltName=DNS:acme.localhost',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    const s = await serve(['--data-dir', join(dir, 'data'), '--tls-cert', join(dir, 'cert.pem'), '--tls-key', join(dir, 'key.pem')], BOOT);
    expect(existsSync(join(dir, 'data', 'tls', 'ca.pem'))).toBe(false);
    const http = new TestHttp(join(dir, 'cert.pem'));
    expect((await login(http, s.port)).status).toBe(200);
    await http.close();
  });

  it('writes JSON request logs with request id, tenant and actor, and never a secret', async () => {
    const dataDir = tempDir();
    // Successful requests are logged at debug only.
    const s = await serve(['--data-dir', dataDir, '--log-level', 'debug'], BOOT);
    const http = new TestHttp(join(dataDir, 'tls', 'ca.pem'));
    const tokens = await login(http, s.port);
    const token = tokens.body.access_token;
    const base = `https://acme.localhost:${s.port}/api/v1`;
    await http.call('GET', `${base}/projects`, { token, query: { token } });
    await http.call('POST', `${base}/users`, { token, body: { email: 'x@acme.test', role: 'read-only', password: 'another-secret-9' } });
    // An SSO callback carries the authorization code and the flow state in its query string.
    await http.call('GET', `${base}/auth/sso/sso_unknown/callback`, { query: { code: 'sso-code-secret-7', state: 'sso-state-secret-7' } });
    await s.stop('SIGTERM');
    const lines = s
      .stdout()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const requests = lines.filter((l) => l.msg === 'request');
    expect(requests.length).toBeGreaterThanOrEqual(3);
    // One reqId per line (JSON.parse would keep only the last of two).
    for (const line of s.stdout().trim().split('\n')) expect(line.match(/"reqId"/g)?.length ?? 0, line).toBeLessThanOrEqual(1);
    // 2xx at debug, 4xx at info.
    expect(requests.find((l) => l.url === '/api/v1/auth/login')).toMatchObject({ level: 20, statusCode: 200 });
    // A token in the query string is not a way to authenticate REST; the unknown parameter is a 400, and the log hides it.
    const list = requests.find((l) => l.method === 'GET' && l.url.startsWith('/api/v1/projects'));
    expect(list).toMatchObject({
      level: 30,
      tenant: 'acme',
      statusCode: 400,
      reqId: expect.stringMatching(/^req_/),
      actor: expect.stringMatching(/^user:/),
    });
    expect(requests.find((l) => l.method === 'POST' && l.url === '/api/v1/users')).toMatchObject({
      level: 20,
      statusCode: 201,
      actor: expect.stringMatching(/^user:/),
    });
    expect(list.url).toContain('token=[redacted]');
    const all = s.stdout() + s.stderr();
    expect(requests.find((l) => l.url.startsWith('/api/v1/auth/sso/'))).toMatchObject({
      statusCode: 404,
      url: '/api/v1/auth/sso/sso_unknown/callback?code=[redacted]&state=[redacted]',
    });
    for (const secret of [
      token,
      tokens.body.refresh_token,
      BOOT.DP_BOOTSTRAP_PASSWORD,
      'another-secret-9',
      'sso-code-secret-7',
      'sso-state-secret-7',
    ])
      expect(all).not.toContain(secret);
    await http.close();
  });
});

describe('dpctl tenant create', () => {
  it('adds a tenant whose admin can log in, with the password from the environment or stdin', async () => {
    const dataDir = tempDir();
    const create = (slug: string, email: string, password: string) =>
      runDpctl(['tenant', 'create', slug, '--admin-email', email, '--data-dir', dataDir], { env: { DP_ADMIN_PASSWORD: password } });
    const fromEnv = await create('beta', 'root@beta.test', 'beta-password-1');
    expect(fromEnv.code).toBe(0);
    // A new data directory is said (a mistyped --data-dir makes a database no running service reads).
    expect(fromEnv.stdout).toContain(`Created a new database in ${dataDir}`);
    const fromStdin = await runDpctl(['tenant', 'create', 'gamma', '--admin-email', 'root@gamma.test', '--data-dir', dataDir], {
      input: 'gamma-password-1\n',
      env: { DP_ADMIN_PASSWORD: '' },
    });
    expect(fromStdin.code).toBe(0);
    expect(fromStdin.stdout).not.toContain('Created a new database');
    const duplicate = await create('beta', 'x@beta.test', 'beta-password-1');
    expect(duplicate.code).toBe(1);
    expect(duplicate.stderr).toContain('already exists');
    const badSlug = await create('Not_A_Slug', 'x@y.test', 'whatever-123');
    expect(badSlug.code).toBe(1);
    expect(badSlug.stderr).toMatch(/lowercase letters/);
    // An email the API's login would refuse: nothing is created, so a corrected rerun succeeds.
    const badEmail = await create('delta', 'nope', 'delta-password-1');
    expect(badEmail.code).toBe(1);
    expect(badEmail.stderr).toContain('the admin email must match format "email" (given: "nope")');
    expect((await create('delta', 'root@delta.test', 'delta-password-1')).code).toBe(0);

    const s = await serve(['--data-dir', dataDir]);
    const http = new TestHttp(join(dataDir, 'tls', 'ca.pem'));
    expect((await login(http, s.port, 'beta', 'root@beta.test', 'beta-password-1')).status).toBe(200);
    expect((await login(http, s.port, 'gamma', 'root@gamma.test', 'gamma-password-1')).status).toBe(200);
    expect((await login(http, s.port, 'delta', 'root@delta.test', 'delta-password-1')).status).toBe(200);
    // A token of one tenant means nothing on another's host.
    const betaToken = (await login(http, s.port, 'beta', 'root@beta.test', 'beta-password-1')).body.access_token;
    expect((await http.call('GET', `https://gamma.localhost:${s.port}/api/v1/projects`, { token: betaToken })).status).toBe(401);
    expect(readFileSync(join(dataDir, 'tls', 'ca.pem'), 'utf8')).toContain('BEGIN CERTIFICATE');
    await http.close();
  });
});

/**
 * Quiet by default: a polled service must not write a line per successful request on the
 * default level, and a terminal gets one human-readable line per entry instead of JSON.
 */
describe('dpctl serve logs', () => {
  /** A login, a burst of successful GETs and one 401 (no token): what a controller's poll and a stray client look like. */
  async function traffic(s: RunningCli, dataDir: string): Promise<void> {
    const http = new TestHttp(join(dataDir, 'tls', 'ca.pem'));
    const token = (await login(http, s.port)).body.access_token;
    const base = `https://acme.localhost:${s.port}/api/v1`;
    const statuses = await Promise.all(
      Array.from({ length: 30 }, (_, i) => http.call('GET', `${base}/${i % 2 ? 'projects' : 'users'}`, { token }).then((r) => r.status)),
    );
    expect(new Set(statuses)).toEqual(new Set([200]));
    expect((await http.call('GET', `${base}/projects`)).status).toBe(401);
    await http.close();
  }

  it('on the default level and with stdout not a terminal: JSON lines, no line per successful request, a 4xx at info with one reqId', async () => {
    const dataDir = tempDir();
    const s = await serve(['--data-dir', dataDir], BOOT);
    await traffic(s, dataDir);
    expect(await s.stop('SIGTERM')).toBe(0);
    const raw = s.stdout().trim().split('\n').filter(Boolean);
    const lines = raw.map((l) => JSON.parse(l));
    const requests = lines.filter((l) => l.msg === 'request');
    // 32 requests: only the 401 is logged.
    expect(requests).toHaveLength(1);
    expect(requests[0]).toMatchObject({
      level: 30,
      method: 'GET',
      url: '/api/v1/projects',
      statusCode: 401,
      tenant: 'acme',
      reqId: expect.stringMatching(/^req_/),
    });
    for (const line of raw) expect(line.match(/"reqId"/g)?.length ?? 0, line).toBeLessThanOrEqual(1);
    expect(lines.every((l) => l.level >= 30)).toBe(true);
  });

  it('--log-format pretty (or DP_LOG_FORMAT): one human-readable line per entry with level, message and fields', async () => {
    const dataDir = tempDir();
    const s = await serve(['--data-dir', dataDir, '--log-format', 'pretty', '--log-level', 'debug'], BOOT);
    await traffic(s, dataDir);
    expect(await s.stop('SIGTERM')).toBe(0);
    const lines = s.stdout().trim().split('\n');
    expect(lines.length).toBeGreaterThanOrEqual(32);
    for (const line of lines) expect(line).toMatch(/^\d\d:\d\d:\d\d\.\d{3} (TRACE|DEBUG|INFO |WARN |ERROR|FATAL) \S/);
    expect(lines.filter((l) => l.startsWith('{'))).toEqual([]);
    // No colours when stdout is no terminal.
    expect(s.stdout()).not.toContain('\x1b[');
    expect(lines).toContainEqual(expect.stringMatching(/^\S+ DEBUG POST \/api\/v1\/auth\/login 200 \d+ms tenant=acme reqId=req_\S+$/));
    expect(lines).toContainEqual(
      expect.stringMatching(/^\S+ DEBUG GET \/api\/v1\/projects 200 \d+ms tenant=acme actor=user:\S+ reqId=req_\S+$/),
    );
    expect(lines).toContainEqual(expect.stringMatching(/^\S+ INFO  GET \/api\/v1\/projects 401 \d+ms tenant=acme reqId=req_\S+$/));
    for (const line of lines) expect(line.match(/reqId=/g)?.length ?? 0, line).toBeLessThanOrEqual(1);

    // The environment variable does the same; the flag wins over it.
    const [envDir, jsonDir] = [tempDir(), tempDir()];
    const [fromEnv, json] = await Promise.all([
      serve(['--data-dir', envDir], { ...BOOT, DP_LOG_FORMAT: 'pretty', DP_LOG_LEVEL: 'debug' }),
      serve(['--data-dir', jsonDir, '--log-format', 'json'], { ...BOOT, DP_LOG_FORMAT: 'pretty', DP_LOG_LEVEL: 'debug' }),
    ]);
    for (const [r, dir] of [
      [fromEnv, envDir],
      [json, jsonDir],
    ] as const) {
      const http = new TestHttp(join(dir, 'tls', 'ca.pem'));
      expect((await http.call('GET', `https://acme.localhost:${r.port}/api/v1/projects`)).status).toBe(401);
      await http.close();
    }
    await Promise.all([fromEnv.stop('SIGTERM'), json.stop('SIGTERM')]);
    expect(fromEnv.stdout()).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  GET \/api\/v1\/projects 401 /m);
    expect(
      json
        .stdout()
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l)),
    ).toContainEqual(expect.objectContaining({ msg: 'request', statusCode: 401 }));
  });

  it('refuses an unknown --log-format', async () => {
    const r = await runDpctl(['serve', '--log-format', 'xml', '--data-dir', tempDir()]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/--log-format.*xml.*json, pretty/s);
  });

  /** `script` (util-linux) runs the command on a pseudo-terminal, as an interactive shell would. */
  const hasScript = (() => {
    try {
      execFileSync('script', ['-qec', 'true', '/dev/null'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();

  it.skipIf(!hasScript)('on a terminal the default is pretty, coloured', async () => {
    const dataDir = tempDir();
    const command = [process.execPath, DPCTL, 'serve', '--port', '0', '--data-dir', dataDir].map((a) => `'${a}'`).join(' ');
    const child = spawn('script', ['-qec', command, '/dev/null'], {
      env: { ...process.env, ...BOOT, NO_COLOR: '', TERM: 'xterm' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    const closed = new Promise((r) => child.once('close', r));
    try {
      const deadline = Date.now() + 20_000;
      while (!/listening on https:\/\/[^:]+:\d+/.test(out)) {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`dpctl serve did not start on a terminal:\n${out}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const port = Number(out.match(/listening on https:\/\/[^:]+:(\d+)/)![1]);
      const http = new TestHttp(join(dataDir, 'tls', 'ca.pem'));
      expect((await http.call('GET', `https://acme.localhost:${port}/api/v1/projects`)).status).toBe(401);
      await http.close();
      const deadline2 = Date.now() + 5_000;
      while (!/ 401 /.test(out) && Date.now() < deadline2) await new Promise((r) => setTimeout(r, 50));
    } finally {
      // Ctrl-C on the terminal: script passes it to the service's foreground group.
      child.stdin.write('\x03');
      setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
      await closed;
    }
    const plain = out.replace(/\x1b\[[0-9;]*m/g, '');
    expect(plain).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  GET \/api\/v1\/projects 401 \d+ms tenant=acme reqId=req_\S+\r?$/m);
    expect(out).toContain('\x1b[32mINFO');
    expect(plain.split(/\r?\n/).filter((l) => l.startsWith('{'))).toEqual([]);
  });
});
