import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, realpath, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { pushAll } from '../../collections.js';
import { isWithin } from '../../paths.js';
import type { ConfigSource, Revision } from './types.js';

/** A file of the directory (relative path), or a link out of it (`outside`: its real target, never read). */
interface Entry {
  file: string;
  outside?: string;
}

/**
 * Every file under `dir` (sorted, relative), skipping dot entries such as git-sync's `.git` link.
 * Links are followed within `root` (git-sync swaps a link to each new checkout), each directory
 * once; a link that leads out of it is listed with its target and not read: the snapshot keeps it
 * as a link, and the controller's confined load reports it (a link to the controller's own files,
 * or to /dev/zero, must not be copied into a revision).
 */
async function listFiles(dir: string, root: string, seen = new Set<string>([root])): Promise<Entry[]> {
  const out: Entry[] = [];
  const entries = await readdir(dir, { withFileTypes: true });
  for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    if (e.name.startsWith('.')) continue;
    const abs = join(dir, e.name);
    const file = relative(root, abs).split(sep).join('/');
    const real = e.isSymbolicLink() ? await realpath(abs).catch(() => undefined) : undefined;
    if (real !== undefined && !isWithin(root, real)) {
      out.push({ file, outside: real });
      continue;
    }
    const s = real !== undefined ? await stat(abs).catch(() => undefined) : undefined;
    if (s?.isDirectory()) {
      if (seen.has(real!)) continue; // each directory once: a link to an ancestor ends
      seen.add(real!);
    }
    if (e.isDirectory() || s?.isDirectory()) pushAll(out, await listFiles(abs, root, seen));
    else if (e.isFile() || s?.isFile()) out.push({ file });
  }
  return out;
}

export interface DirectorySourceOptions {
  /**
   * Where each revision's snapshot is kept (`<snapshots>/<revision>/`); the controller's state
   * directory when it has one, else a private temporary directory.
   */
  snapshotDir?: string;
}

/**
 * A plain directory (e.g. kept up to date by a git-sync sidecar). Its revision is a hash of
 * the files' names and contents, so a change of any file is a new revision.
 *
 * Each revision is copied into a snapshot, read once for both the hash and the copy, the way
 * the git source exports each commit. The copy is what makes "the last good revision stays in
 * force" true for a directory: after an invalid edit the live files are broken, but the
 * snapshot of the revision before it is still there to plan against.
 */
export class DirectorySource implements ConfigSource {
  readonly description: string;
  private readonly dir: string;
  private snapshots: string | undefined;
  /** True when the snapshots live in a temporary directory of our own, removed on close(). */
  private ownsSnapshots = false;

  constructor(dir: string, options: DirectorySourceOptions = {}) {
    this.dir = resolve(dir);
    this.description = `directory ${this.dir}`;
    this.snapshots = options.snapshotDir === undefined ? undefined : resolve(options.snapshotDir);
  }

  private async snapshotRoot(): Promise<string> {
    if (this.snapshots === undefined) {
      this.snapshots = await mkdtemp(join(tmpdir(), 'dpctl-dir-'));
      this.ownsSnapshots = true;
    }
    await mkdir(this.snapshots, { recursive: true, mode: 0o700 });
    return this.snapshots;
  }

  async fetch(): Promise<Revision> {
    const s = await stat(this.dir).catch(() => undefined);
    if (!s?.isDirectory()) throw new Error(`${this.dir}: not a directory`);
    const root = await realpath(this.dir);
    const entries = await listFiles(root, root);
    const contents = new Map<string, Buffer | { outside: string }>();
    const hash = createHash('sha256');
    for (const { file, outside } of entries) {
      const bytes = outside === undefined ? await readFile(join(root, file)) : Buffer.from(`-> ${outside}`);
      contents.set(file, outside === undefined ? bytes : { outside });
      hash.update(`${file}\0`);
      hash.update(bytes);
      hash.update('\0');
    }
    const files = entries.map((e) => e.file);
    const id = `sha256:${hash.digest('hex').slice(0, 16)}`;
    const snapshot = join(await this.snapshotRoot(), id.replace(':', '-'));
    if (!existsSync(snapshot)) await this.write(snapshot, contents);
    const yaml = files.filter((f) => /\.ya?ml$/i.test(f)).length;
    return { id, configDir: snapshot, root: snapshot, summary: `${yaml} YAML file${yaml === 1 ? '' : 's'}` };
  }

  /** Written under a temporary name and renamed, so a crash never leaves a half snapshot that looks complete. */
  private async write(dest: string, contents: Map<string, Buffer | { outside: string }>) {
    const tmp = `${dest}.${randomBytes(4).toString('hex')}.tmp`;
    try {
      await mkdir(tmp, { recursive: true, mode: 0o700 });
      for (const [f, bytes] of contents) {
        await mkdir(dirname(join(tmp, f)), { recursive: true });
        if (Buffer.isBuffer(bytes)) await writeFile(join(tmp, f), bytes, { mode: 0o600 });
        else await symlink(bytes.outside, join(tmp, f));
      }
      await rename(tmp, dest);
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  }

  async close(): Promise<void> {
    if (!this.ownsSnapshots || !this.snapshots) return;
    await rm(this.snapshots, { recursive: true, force: true });
    this.snapshots = undefined;
    this.ownsSnapshots = false;
  }

  async cleanup(keep: string[]): Promise<void> {
    if (!this.snapshots) return;
    const names = await readdir(this.snapshots).catch(() => [] as string[]);
    const kept = new Set(keep.map((id) => id.replace(':', '-')));
    for (const name of names) if (!kept.has(name)) await rm(join(this.snapshots, name), { recursive: true, force: true });
  }
}
