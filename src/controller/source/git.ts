import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, rename, rm } from 'node:fs/promises';
import { isAbsolute, join, resolve } from 'node:path';
import { isWithin } from '../../paths.js';
import type { ConfigSource, Revision } from './types.js';
import { redactUrl } from './types.js';

export interface GitSourceOptions {
  /** Remote URL, `file://` URL or local path of a repository. */
  url: string;
  branch: string;
  /** Directory inside the repository that holds the YAML (`.` for the root). */
  path: string;
  /** The controller's state directory: the mirror and checkouts live under `<stateDir>/git/`. */
  stateDir: string;
  /** Cap of one git command (default 120 s). */
  timeoutMs?: number;
}

/** Runs git without ever prompting for credentials; errors carry git's message with URLs redacted. */
function git(args: string[], options: { env?: NodeJS.ProcessEnv; signal?: AbortSignal; timeoutMs: number }): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    execFile(
      'git',
      args,
      {
        env: { ...process.env, GIT_TERMINAL_PROMPT: '0', GIT_ASKPASS: 'true', LC_ALL: 'C', ...options.env },
        signal: options.signal,
        timeout: options.timeoutMs,
        maxBuffer: 16 * 1024 * 1024,
      },
      (err, stdout, stderr) => {
        if (err) {
          const detail = redactUrl(
            String(stderr || err.message)
              .trim()
              .split('\n')
              .filter(Boolean)
              .slice(-3)
              .join('; '),
          );
          // Name the subcommand (fetch, checkout...), not the option values before it.
          const sub = args.find((a, i) => !a.startsWith('-') && !['--git-dir', '--work-tree'].includes(args[i - 1]));
          reject(new Error(`git ${sub ?? ''} failed: ${detail}`));
        } else resolvePromise(String(stdout).trim());
      },
    );
  });
}

/**
 * A git branch: a bare mirror under the state directory is fetched (only the branch), and
 * each new commit is exported into its own checkout directory, written under a temporary name
 * and renamed into place, so a crash never leaves a half-written revision that looks complete.
 * Local paths and file:// URLs go through the same fetch as remote URLs.
 */
export class GitSource implements ConfigSource {
  readonly description: string;
  private readonly url: string;
  private readonly base: string;
  private readonly mirror: string;
  private readonly timeoutMs: number;

  constructor(private readonly options: GitSourceOptions) {
    // A relative local path means the same repository wherever git runs from.
    this.url =
      !/^[a-z][a-z0-9+.-]*:/i.test(options.url) && !isAbsolute(options.url) && existsSync(options.url) ? resolve(options.url) : options.url;
    this.description = `git ${redactUrl(this.url)} branch ${options.branch}${options.path && options.path !== '.' ? ` path ${options.path}` : ''}`;
    const id = createHash('sha256').update(`${this.url}\0${options.branch}`).digest('hex').slice(0, 12);
    this.base = join(options.stateDir, 'git', id);
    this.mirror = join(this.base, 'mirror.git');
    this.timeoutMs = options.timeoutMs ?? 120_000;
  }

  private run(args: string[], signal?: AbortSignal, env?: NodeJS.ProcessEnv) {
    return git(['--git-dir', this.mirror, ...args], { signal, env, timeoutMs: this.timeoutMs });
  }

  async fetch(signal?: AbortSignal): Promise<Revision> {
    if (!existsSync(join(this.mirror, 'HEAD'))) {
      await mkdir(this.base, { recursive: true, mode: 0o700 });
      await git(['init', '--bare', '--quiet', this.mirror], { signal, timeoutMs: this.timeoutMs });
    }
    const ref = `refs/remotes/source/${this.options.branch}`;
    await this.run(
      ['fetch', '--quiet', '--force', '--no-tags', '--depth', '1', this.url, `+refs/heads/${this.options.branch}:${ref}`],
      signal,
    );
    const commit = await this.run(['rev-parse', '--verify', `${ref}^{commit}`], signal);
    const root = join(this.base, 'checkouts', commit);
    if (!existsSync(root)) await this.export(commit, root, signal);
    const configDir = resolve(root, this.options.path || '.');
    if (!isWithin(root, configDir)) throw new Error(`--path ${this.options.path} leaves the repository`);
    // A commit without the --path directory is a revision all the same: its validation reports
    // "no such file or directory" and keeps the last good one in force (Ready False, as Flux does
    // for a missing path), where a failed fetch would leave Ready True on the revision before.
    const summary = await this.run(['log', '-1', '--format=%s', commit], signal).catch(() => undefined);
    return { id: commit, configDir, root, summary };
  }

  /** Writes the tree of `commit` into `dest` (own index file, so the mirror's index is never shared). */
  private async export(commit: string, dest: string, signal?: AbortSignal) {
    const tmp = `${dest}.${randomBytes(4).toString('hex')}.tmp`;
    await mkdir(tmp, { recursive: true });
    try {
      await this.run(['--work-tree', tmp, 'checkout', '--quiet', '--force', commit, '--', '.'], signal, { GIT_INDEX_FILE: `${tmp}.index` });
      await rename(tmp, dest);
    } finally {
      await rm(tmp, { recursive: true, force: true });
      await rm(`${tmp}.index`, { force: true });
    }
  }

  async cleanup(keep: string[]): Promise<void> {
    const dir = join(this.base, 'checkouts');
    const names = await readdir(dir).catch(() => [] as string[]);
    for (const name of names) if (!keep.includes(name)) await rm(join(dir, name), { recursive: true, force: true });
  }
}
