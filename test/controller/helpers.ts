import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { mkdirSync } from 'node:fs';
import pino from 'pino';
import { EXAMPLE, SECRET_ENV } from '../integration/engine/helpers.js';
import { GitSource, startController, type ControllerOptions, type RunningController } from '../../src/controller/index.js';

const GIT_ENV = {
  ...process.env,
  GIT_AUTHOR_NAME: 'Test',
  GIT_AUTHOR_EMAIL: 'test@example.com',
  GIT_COMMITTER_NAME: 'Test',
  GIT_COMMITTER_EMAIL: 'test@example.com',
  GIT_CONFIG_NOSYSTEM: '1',
  HOME: tmpdir(),
};

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', args, { cwd, env: GIT_ENV, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

/**
 * A real git remote for the controller: a bare repository (`remote`) and a work clone where
 * tests edit YAML and push, as a team would.
 */
export class TestRepo {
  readonly root = mkdtempSync(join(tmpdir(), 'dp-ctl-git-'));
  readonly remote = join(this.root, 'remote.git');
  readonly work = join(this.root, 'work');

  constructor() {
    git(this.root, 'init', '--bare', '--quiet', '--initial-branch=main', this.remote);
    git(this.root, 'clone', '--quiet', this.remote, this.work);
    git(this.work, 'checkout', '--quiet', '-B', 'main');
  }

  /** Copies examples/platform into `dir` of the work tree (not committed yet). */
  addExample(dir = 'platform'): this {
    cpSync(EXAMPLE, join(this.work, dir), { recursive: true });
    return this;
  }

  write(file: string, text: string): this {
    mkdirSync(dirname(join(this.work, file)), { recursive: true });
    writeFileSync(join(this.work, file), text);
    return this;
  }

  remove(file: string): this {
    rmSync(join(this.work, file), { recursive: true, force: true });
    return this;
  }

  /** Commits everything and pushes to the bare remote; returns the commit id. */
  commit(message: string): string {
    git(this.work, 'add', '-A');
    git(this.work, 'commit', '--quiet', '-m', message);
    git(this.work, 'push', '--quiet', 'origin', 'main');
    return git(this.work, 'rev-parse', 'HEAD');
  }

  close() {
    rmSync(this.root, { recursive: true, force: true });
  }
}

/** Polls until `check` returns a value other than undefined/null/false, or fails with the last state. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = 30_000,
  describe?: () => unknown,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== null && v !== false) return v;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${describe ? `: ${JSON.stringify(describe(), null, 1).slice(0, 3000)}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The controller as these tests run it: sourceId `platform`, the examples' secrets in its env,
 * silent logs and no process metrics; anything given overrides (engine options are merged).
 */
export function startTestController(
  options: Pick<ControllerOptions, 'source' | 'client' | 'mode' | 'intervalMs'> & Partial<ControllerOptions>,
): Promise<RunningController> {
  return startController({
    logger: pino({ level: 'silent' }),
    processMetrics: false,
    ...options,
    engine: { sourceId: 'platform', env: { ...process.env, ...SECRET_ENV }, ...options.engine },
  });
}

/** A git source on `repo`'s remote (or any URL), `platform/` of `main`, with a fresh state directory. */
export function gitSourceOf(url: string, path = 'platform'): GitSource {
  return new GitSource({ url, branch: 'main', path, stateDir: mkdtempSync(join(tmpdir(), 'dp-ctl-state-')) });
}
