import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import pg from 'pg';

/**
 * A throwaway PostgreSQL server in a temp directory, for the `postgres` test project and the
 * benches. Binaries come from PG_BIN (default /usr/local/bin); as root they run as the
 * `postgres` user.
 */
const PG_BIN = process.env.PG_BIN ?? '/usr/local/bin';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** As root, the server must run as `postgres` (it refuses root); spawn switches user itself so signals reach it. */
function postgresUser(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  return { uid: Number(spawnSync('id', ['-u', 'postgres']).stdout), gid: Number(spawnSync('id', ['-g', 'postgres']).stdout) };
}

async function waitForServer(url: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`postgres exited with ${child.exitCode}:\n${log()}`);
    const client = new pg.Client({ connectionString: url });
    try {
      await client.connect();
      await client.end();
      return;
    } catch {
      await client.end().catch(() => undefined);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error(`postgres did not accept connections within 30 s:\n${log()}`);
}

/** One connection for `fn`, closed after it whatever happens. */
export async function withPg<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export interface ThrowawayPostgres {
  url: string;
  stop(): Promise<void>;
}

/**
 * Starts a server. `settings` are `-c` options; tests pass fsync=off (speed, nothing to keep),
 * benches pass the durability they state.
 */
export async function startThrowawayPostgres(settings: Record<string, string>): Promise<ThrowawayPostgres> {
  if (!existsSync(join(PG_BIN, 'initdb')))
    throw new Error(`PostgreSQL server binaries not found in ${PG_BIN} (set PG_BIN, or DP_TEST_DATABASE_URL for an existing server)`);
  const dir = mkdtempSync(join(tmpdir(), 'dp-pg-'));
  const dataDir = join(dir, 'data');
  const user = postgresUser();
  if (user.uid !== undefined) {
    chownSync(dir, user.uid, user.gid!);
    chmodSync(dir, 0o700);
  }
  const init = spawnSync(
    join(PG_BIN, 'initdb'),
    ['-D', dataDir, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-locale', '--no-sync'],
    { encoding: 'utf8', ...user },
  );
  if (init.status !== 0) throw new Error(`initdb failed:\n${init.stdout}\n${init.stderr}`);
  const port = await freePort();
  const args = [
    '-D',
    dataDir,
    '-p',
    String(port),
    '-k',
    dir,
    '-c',
    'listen_addresses=127.0.0.1',
    ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
  ];
  let output = '';
  const child = spawn(join(PG_BIN, 'postgres'), args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: dir, ...user });
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  // A process that ends without calling stop() (a script that crashed) must not leave its server
  // running: SIGQUIT is PostgreSQL's immediate shutdown, the one a synchronous 'exit' handler can ask for.
  const stopOnExit = () => {
    child.kill('SIGQUIT');
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', stopOnExit);
  await waitForServer(url, child, () => output);
  return {
    url,
    async stop() {
      process.off('exit', stopOnExit);
      child.kill('SIGINT');
      await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
