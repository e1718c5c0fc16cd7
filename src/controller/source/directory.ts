import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join, relative, resolve, sep } from 'node:path';
import type { ConfigSource, Revision } from './types.js';

/** Every file under `dir` (sorted, relative), skipping dot entries such as git-sync's `.git` link. */
async function listFiles(dir: string, root = dir): Promise<string[]> {
  const out: string[] = [];
  const entries = await readdir(dir, { withFileTypes: true });
  for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    if (e.name.startsWith('.')) continue;
    const abs = join(dir, e.name);
    // git-sync swaps a symlink to the new checkout: follow links.
    const s = e.isSymbolicLink() ? await stat(abs).catch(() => undefined) : undefined;
    if (e.isDirectory() || s?.isDirectory()) out.push(...(await listFiles(abs, root)));
    else if (e.isFile() || s?.isFile()) out.push(relative(root, abs).split(sep).join('/'));
  }
  return out;
}

/**
 * A plain directory (e.g. kept up to date by a git-sync sidecar). Its revision is a hash of
 * the YAML files' names and contents, so a change of any file is a new revision.
 */
export class DirectorySource implements ConfigSource {
  readonly description: string;
  private readonly dir: string;

  constructor(dir: string) {
    this.dir = resolve(dir);
    this.description = `directory ${this.dir}`;
  }

  async fetch(): Promise<Revision> {
    const s = await stat(this.dir).catch(() => undefined);
    if (!s?.isDirectory()) throw new Error(`${this.dir}: not a directory`);
    const hash = createHash('sha256');
    const files = (await listFiles(this.dir)).filter((f) => /\.ya?ml$/i.test(f));
    for (const f of files) {
      hash.update(`${f}\0`);
      hash.update(await readFile(join(this.dir, f)));
      hash.update('\0');
    }
    return { id: `sha256:${hash.digest('hex').slice(0, 16)}`, configDir: this.dir, root: this.dir, summary: `${files.length} YAML file${files.length === 1 ? '' : 's'}` };
  }
}
