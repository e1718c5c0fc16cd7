import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { PACKAGE_VERSION } from '../version.js';
import { DOCUMENT_VALIDATOR_HASH } from './generated/document-validator.js';

/**
 * The persistent parse/validation cache of `dpctl plan / apply / drift / adopt`: for each YAML
 * file whose documents are all valid, the parsed documents, keyed by a hash of the file's text,
 * the package version and the generated validator (so an upgrade or a schema change never reuses
 * an entry). A later run with the same file skips parsing and validating it; everything that
 * depends on other files or on the server (duplicates, references, DAGs, secrets, the plan) is
 * checked again every run. Files with errors are never cached, so their messages always come from
 * a fresh parse.
 *
 * Where: DPCTL_CACHE_DIR, else $XDG_CACHE_HOME/dpctl, else ~/.cache/dpctl (entries under
 * `parse-v1/`). `--no-cache` bypasses it. Safe to delete at any time; an entry that cannot be read
 * or parsed, or that was cut short, is ignored (and rewritten); nothing about the cache is ever an
 * error. Bounded: after a run that wrote entries, the oldest are deleted until the whole is under
 * 80% of the bound (DPCTL_CACHE_MAX_MB, default 256 MB).
 */
export const CACHE_FORMAT = 'parse-v1';
export const DEFAULT_CACHE_MAX_BYTES = 256 * 2 ** 20;

export function defaultCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.DPCTL_CACHE_DIR) return env.DPCTL_CACHE_DIR;
  if (env.XDG_CACHE_HOME) return join(env.XDG_CACHE_HOME, 'dpctl');
  return join(homedir(), '.cache', 'dpctl');
}

/** The bound from DPCTL_CACHE_MAX_MB (a positive number), else the default. */
export function cacheMaxBytes(env: NodeJS.ProcessEnv = process.env): number {
  const mb = Number(env.DPCTL_CACHE_MAX_MB);
  return env.DPCTL_CACHE_MAX_MB && Number.isFinite(mb) && mb > 0 ? Math.floor(mb * 2 ** 20) : DEFAULT_CACHE_MAX_BYTES;
}

/** Values JSON keeps exactly (no NaN, infinities or -0, which it would change). */
function jsonExact(values: unknown[]): string | undefined {
  let exact = true;
  const text = JSON.stringify(values, (_k, v) => {
    if (typeof v === 'number' && (!Number.isFinite(v) || Object.is(v, -0))) exact = false;
    return v;
  });
  return exact ? text : undefined;
}

export class PersistentParseCache {
  readonly dir: string;
  private readonly prefix: string;
  private wrote = false;

  constructor(
    root: string = defaultCacheDir(),
    private readonly maxBytes: number = cacheMaxBytes(),
  ) {
    this.dir = join(root, CACHE_FORMAT);
    this.prefix = `${CACHE_FORMAT}\0${PACKAGE_VERSION}\0${DOCUMENT_VALIDATOR_HASH}\0`;
  }

  keyOf(text: string): string {
    return createHash('sha256').update(this.prefix).update(text).digest('hex');
  }

  private pathOf(key: string): string {
    return join(this.dir, key.slice(0, 2), `${key}.json`);
  }

  /** The documents stored for `key` (null for empty documents), or undefined. Never throws. */
  read(key: string): unknown[] | undefined {
    try {
      const entry = JSON.parse(readFileSync(this.pathOf(key), 'utf8')) as { key?: unknown; documents?: unknown };
      return entry && entry.key === key && Array.isArray(entry.documents) ? entry.documents : undefined;
    } catch {
      return undefined;
    }
  }

  /** Stores the documents of a valid file. Best effort: a cache that cannot be written is no cache. */
  write(key: string, documents: unknown[]): void {
    const json = jsonExact(documents);
    if (json === undefined) return;
    const file = this.pathOf(key);
    const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    try {
      mkdirSync(join(this.dir, key.slice(0, 2)), { recursive: true, mode: 0o700 });
      writeFileSync(tmp, `{"key":${JSON.stringify(key)},"documents":${json}}`, { mode: 0o600 });
      renameSync(tmp, file);
      this.wrote = true;
    } catch {
      try {
        rmSync(tmp, { force: true });
      } catch {
        // Nothing was written.
      }
    }
  }

  /** After a load: when it wrote entries, keeps the cache within its bound (oldest entries go first). */
  settle(): void {
    if (!this.wrote) return;
    this.wrote = false;
    try {
      prune(this.dir, this.maxBytes);
    } catch {
      // Another process pruning at the same time, a directory deleted under us: next time.
    }
  }
}

function prune(dir: string, maxBytes: number): void {
  const entries: { path: string; size: number; mtime: number }[] = [];
  let total = 0;
  for (const sub of readdirSync(dir)) {
    let names: string[];
    try {
      names = readdirSync(join(dir, sub));
    } catch {
      continue;
    }
    for (const name of names) {
      const path = join(dir, sub, name);
      try {
        const st = statSync(path);
        // Leftovers of a writer that died between write and rename.
        if (name.endsWith('.tmp') && Date.now() - st.mtimeMs > 3_600_000) {
          rmSync(path, { force: true });
          continue;
        }
        entries.push({ path, size: st.size, mtime: st.mtimeMs });
        total += st.size;
      } catch {
        // Gone already.
      }
    }
  }
  if (total <= maxBytes) return;
  entries.sort((a, b) => a.mtime - b.mtime);
  const target = maxBytes * 0.8;
  for (const e of entries) {
    if (total <= target) break;
    rmSync(e.path, { force: true });
    total -= e.size;
  }
}
