import { formatConfigError } from '../config/index.js';
import { loadDeclared, type EngineOptions } from '../engine/index.js';
import type { ConfigSource, Revision } from './source/types.js';
import type { ControllerStatus } from './status.js';

/**
 * The fetch and validate steps of a run, and the revisions they leave: the newest seen and the
 * one in force (the last valid one). An invalid revision is reported and the last good one stays.
 */

/** What a fetch came to. */
export type Fetched = { ok: true; rev: Revision } | { ok: false; error: string };

/** What a fetch did to the revisions. */
export type Seen =
  | { kind: 'fetch-failed'; error: string }
  /** The revision seen last time again (valid or not): nothing to validate. */
  | { kind: 'unchanged'; rev: Revision }
  | { kind: 'new'; rev: Revision };

/** What validating a new revision came to: in force, or reported with the one in force kept. */
export type Checked =
  | { kind: 'invalid'; rev: Revision; errors: string[]; inForce: Revision | undefined }
  | { kind: 'valid'; rev: Revision; previous: Revision | undefined };

/** The revision fields of the status a step changes. */
export type RevisionPatch = Partial<ControllerStatus['revision']>;

/** Fetches the source; a failure is a result, unless the run was aborted (then it is thrown). */
export async function fetchRevision(source: ConfigSource, signal: AbortSignal): Promise<Fetched> {
  try {
    return { ok: true, rev: await source.fetch(signal) };
  } catch (err) {
    if (signal.aborted) throw err;
    return { ok: false, error: (err as Error).message };
  }
}

/** Errors of a revision as `file:line:column: ...`, relative to the checkout. */
export async function validateRevision(rev: Revision, engine: EngineOptions): Promise<string[]> {
  return (await loadDeclared([rev.configDir], { ...engine, cwd: rev.root })).errors.map(formatConfigError);
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The revisions seen so far: see() takes a fetch, check() a new revision's validation, which puts a valid one in force. */
export class Revisions {
  private seen: string | undefined;
  private good: Revision | undefined;

  constructor(private readonly now: () => number = Date.now) {}

  /** The last revision that passed validation. */
  get inForce(): Revision | undefined {
    return this.good;
  }

  see(fetched: Fetched): { seen: Seen; revision: RevisionPatch } {
    if (!fetched.ok) return { seen: { kind: 'fetch-failed', error: fetched.error }, revision: { fetch_error: fetched.error } };
    const { rev } = fetched;
    const revision: RevisionPatch = { fetch_error: null, last_fetch_at: iso(this.now()) };
    if (rev.id === this.seen) return { seen: { kind: 'unchanged', rev }, revision };
    this.seen = rev.id;
    return { seen: { kind: 'new', rev }, revision: { ...revision, fetched: { id: rev.id, summary: rev.summary ?? null, at: iso(this.now()) } } };
  }

  /** `errors`: the new revision's validation errors (validateRevision). */
  check(rev: Revision, errors: string[]): { checked: Checked; revision: RevisionPatch } {
    const summary = rev.summary ?? null;
    if (errors.length) return { checked: { kind: 'invalid', rev, errors, inForce: this.good }, revision: { invalid: { id: rev.id, summary, errors } } };
    const previous = this.good;
    this.good = rev;
    return { checked: { kind: 'valid', rev, previous }, revision: { invalid: null, applied: { id: rev.id, summary, at: iso(this.now()) } } };
  }
}
