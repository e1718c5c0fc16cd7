import { createHash } from 'node:crypto';
import { dirname } from 'node:path';
import type { ConfigError, SourceLocation } from './errors.js';
import type { KindLayout } from './layout.js';
import type { ConfigDocument } from './model.js';
import type { PersistentParseCache } from './persistent-cache.js';

/** Where an object keeps the computations of its lazy properties not read yet (not enumerable: invisible to copies and comparisons). */
const PENDING = Symbol('dpctl.lazy');
type Pending = Record<PropertyKey, (this: object) => unknown>;

/** One getter/setter pair per property name, shared by every object (a closure pair per object and property was most of a document's size). */
const accessors = new Map<PropertyKey, PropertyDescriptor>();
function accessorFor(key: PropertyKey): PropertyDescriptor {
  let accessor = accessors.get(key);
  if (!accessor) {
    accessor = {
      enumerable: true,
      configurable: true,
      get(this: Record<PropertyKey, unknown> & { [PENDING]?: Pending }) {
        const compute = this[PENDING]?.[key];
        // Called on the object that reads it: a shared computation (defineLazyShared) finds its inputs there.
        const value = compute ? compute.call(this) : undefined;
        settle(this, key, value);
        return value;
      },
      set(this: Record<PropertyKey, unknown>, value: unknown) {
        settle(this, key, value);
      },
    };
    accessors.set(key, accessor);
  }
  return accessor;
}

/**
 * The value becomes a plain property of the object that read it. Its computation stays in the
 * table (copies of the object, which share the table, may still need it; positions are rarely read).
 */
function settle(obj: Record<PropertyKey, unknown>, key: PropertyKey, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * Defines `key` on `obj` as computed on first read (then a plain value). Positions are lazy: the
 * fast path parses without them, and most loads never ask for one.
 */
export function defineLazy<T extends object, K extends keyof T>(obj: T, key: K, compute: () => T[K]): void {
  const target = obj as T & { [PENDING]?: Pending };
  let pending = target[PENDING];
  if (!pending) {
    pending = {};
    Object.defineProperty(target, PENDING, { value: pending, enumerable: false, writable: false, configurable: true });
  }
  pending[key as PropertyKey] = compute;
  Object.defineProperty(target, key, accessorFor(key as PropertyKey));
}

/**
 * defineLazy for many objects of one shape: `table` (one object, shared by all of them, never
 * changed) holds each property's computation, called with the object that reads it as `this`, so
 * it finds its inputs on the object itself. Nothing is allocated per object (no closure, no table
 * of its own): at 100,000 documents the closures and their contexts were ~0.3 KB per document.
 */
export function defineLazyShared<T extends object>(obj: T, table: { readonly [K in keyof T]?: (this: T) => T[K] }): void {
  Object.defineProperty(obj, PENDING, { value: table, enumerable: false, writable: false, configurable: true });
  for (const key in table) Object.defineProperty(obj, key, accessorFor(key));
}

/**
 * A copy of `obj` with `changes`, lazy properties kept lazy (a spread would compute them). The
 * copy shares the table of computations and computes its lazy properties for itself. Plain values
 * are assigned, not defined: Object.defineProperties of every descriptor cost about 25 µs a
 * document, most of re-basing a checkout.
 */
function withChanges<T extends object>(obj: T, changes: Partial<T>): T {
  const copy: Record<PropertyKey, unknown> = {};
  const changed: Record<PropertyKey, unknown> = changes;
  for (const key of Reflect.ownKeys(obj)) {
    if (Object.hasOwn(changed, key)) {
      copy[key] = changed[key];
      continue;
    }
    const d = Object.getOwnPropertyDescriptor(obj, key)!;
    if (d.writable && d.enumerable && d.configurable) copy[key] = d.value;
    else Object.defineProperty(copy, key, d);
  }
  for (const key of Object.keys(changed)) if (!Object.hasOwn(copy, key)) copy[key] = changed[key];
  return copy as T;
}

/** What is known of a document even when it is invalid: enough for duplicate, project and reference checks. */
export interface Identified {
  layout: KindLayout;
  name: string;
  project?: string;
  key: string;
  nameLocation: SourceLocation;
  /** Where metadata.project is, for documents that name a project. */
  projectLocation?: SourceLocation;
}

/** Everything loadConfig learns from one file on its own, before the checks across files. */
export interface FileResult {
  errors: ConfigError[];
  identified: Identified[];
  /** Valid documents. */
  documents: ConfigDocument[];
  /** Invalid documents, kept for their references. */
  drafts: ConfigDocument[];
}

/**
 * Parsed files by content, for a process that loads the same config again and again (the
 * controller loads every revision to validate it, and again on every run). Parsing YAML is most
 * of a load (about 2 s for 10,000 documents); with the cache only the files a commit changed are
 * parsed again. Entries are keyed by the file's display name and a hash of its text, not by its
 * absolute path, so a new checkout of a commit that changed one file reuses the other files; the
 * parts that depend on where the file is (the path secrets are read relative to) are re-based.
 * Entries unused in the last two loads are dropped, so the cache holds about two revisions.
 */
export class ConfigParseCache {
  /**
   * Also keeps valid files' documents on disk, across processes (`dpctl plan` and friends): see
   * persistent-cache.ts. Without it, the cache lives as long as this object.
   */
  readonly persistent?: PersistentParseCache;
  /** Whether parsed files are also kept in this object for a later load (false: a command that loads once). */
  private readonly memory: boolean;
  private entries = new Map<string, { result: FileResult; absolutePath: string }>();
  private previous = new Set<string>();
  private current = new Set<string>();

  /**
   * `memory: false` (with `persistent`): nothing is kept in this object, only on disk; for a
   * process that loads once (dpctl plan), which would otherwise hold every file's parse twice.
   */
  constructor(options: { persistent?: PersistentParseCache; memory?: boolean } = {}) {
    this.persistent = options.persistent;
    this.memory = options.memory ?? true;
  }

  /** Starts a load: what the load before the previous one used becomes evictable. */
  beginLoad(): void {
    for (const key of this.entries.keys()) {
      if (!this.current.has(key) && !this.previous.has(key)) this.entries.delete(key);
    }
    this.previous = this.current;
    this.current = new Set();
  }

  get size(): number {
    return this.entries.size;
  }

  lookup(file: string, absolutePath: string, text: string, parse: () => FileResult): FileResult {
    if (!this.memory) return parse();
    const key = `${file}\0${createHash('sha256').update(text).digest('hex')}`;
    this.current.add(key);
    const hit = this.entries.get(key);
    if (hit?.absolutePath === absolutePath) return hit.result;
    if (hit) {
      // A new checkout: re-based once (about 20 µs a document) and kept at its new place, because
      // the controller loads each checkout again and again (to validate it, to plan it, then on
      // every run while it is in force): re-basing on every load cost 0.2-0.4 s a load at 10,000
      // documents, more than the rest of a cached load.
      const result = rebase(hit.result, absolutePath);
      this.entries.set(key, { result, absolutePath });
      return result;
    }
    const result = parse();
    this.entries.set(key, { result, absolutePath });
    return result;
  }
}

/** The same file's results as if read at `absolutePath`. Documents are never mutated after loading, so sharing the rest is safe. */
function rebase(result: FileResult, absolutePath: string): FileResult {
  const baseDir = dirname(absolutePath);
  const move = (doc: ConfigDocument): ConfigDocument =>
    withChanges(doc, {
      source: { ...doc.source, absolutePath },
      secrets: doc.secrets.map((s) => withChanges(s, { baseDir })),
    });
  return { ...result, documents: result.documents.map(move), drafts: result.drafts.map(move) };
}
