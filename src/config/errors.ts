import type { ProblemCode } from '../kinds/errors.js';

/** Where something is written: file (as displayed), 1-based line and column. */
export interface SourceLocation {
  file: string;
  line: number;
  column: number;
}

/** One problem found in a YAML repository, reported as `file:line:column: Kind/name: field: message`. */
export interface ConfigError {
  /** What kind of problem, from the catalogue (kinds/errors.ts): what tools group and count by. */
  code: ProblemCode;
  file: string;
  /** 1-based; absent for a problem with the file as a whole (unreadable, no documents). */
  line?: number;
  column?: number;
  /** `Kind/name` of the document, when known. */
  subject?: string;
  /** Field path in the document as written (`spec.config.port`, `metadata.project`). */
  field?: string;
  message: string;
  /** How this error relates to others, for sortErrors (never printed). */
  relation?: ErrorRelation;
  /** Set by sortErrors on a root cause: how many errors right after it follow from it. */
  followers?: number;
  /** Set by sortErrors on an error that follows from the root cause listed before it. */
  follows?: boolean;
}

/**
 * What sortErrors needs to put an error under its root cause. Keys are opaque strings made by
 * documentKey (a document: kind, project, name) or by the loader (a field of one document).
 */
export interface ErrorRelation {
  /** A YAML syntax error: listed before every other error; later syntax errors of its file follow from the first. */
  syntax?: true;
  /** What this error breaks: a document it keeps out of the loaded set, a field it leaves unset. */
  causes?: string[];
  /** What this error is about: an error that `causes` one of these is its root cause. */
  follows?: string[];
}

/** The key of a document for ErrorRelation: kind as written in YAML (`Connector`), project (none for tenant-level kinds), name. */
export const documentKey = (yamlKind: string, project: string | undefined, name: string): string =>
  `doc\0${yamlKind}\0${project ?? ''}\0${name.trim().toLowerCase()}`;

export const formatLocation = (loc: SourceLocation): string => `${loc.file}:${loc.line}:${loc.column}`;

/** How a follower is set apart under its root cause (indented, so `^file:line` still finds only root causes). */
export const FOLLOWER_PREFIX = '  ↳ ';

export function formatConfigError(e: ConfigError): string {
  const where = e.line !== undefined ? `${e.file}:${e.line}:${e.column ?? 1}` : e.file;
  return markRelation(e, [where, e.subject, e.field, e.message].filter((p) => p !== undefined && p !== '').join(': '));
}

/** An error's line, indented when it follows from a root cause, with the count of its followers when it is one. */
export function markRelation(e: Pick<ConfigError, 'follows' | 'followers'>, line: string): string {
  if (e.follows) return `${FOLLOWER_PREFIX}${line}`;
  if (e.followers)
    return `${line} (and ${e.followers} error${e.followers === 1 ? '' : 's'} that follow${e.followers === 1 ? 's' : ''} from it)`;
  return line;
}

/** Errors that follow from one root cause listed in full up to this many; beyond, the first FOLLOWERS_SHOWN and a count. */
export const FOLLOWERS_LISTED = 8;
export const FOLLOWERS_SHOWN = 5;

/** The lines to print: every root cause, each with the errors that follow from it (only the first few and a count when many). */
export const showErrors = (errors: { text: string; follows: boolean }[]): string =>
  errorLines(errors)
    .map((l) => `${l}\n`)
    .join('');

/** showErrors, as lines. */
export function errorLines(errors: { text: string; follows: boolean }[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < errors.length;) {
    out.push(errors[i].text);
    let end = i + 1;
    while (end < errors.length && errors[end].follows) end++;
    const followers = errors.slice(i + 1, end);
    if (followers.length <= FOLLOWERS_LISTED) out.push(...followers.map((f) => f.text));
    else
      out.push(
        ...followers.slice(0, FOLLOWERS_SHOWN).map((f) => f.text),
        `${FOLLOWER_PREFIX}... and ${followers.length - FOLLOWERS_SHOWN} more`,
      );
    i = end;
  }
  return out;
}

/** How many root causes a sorted list holds (the errors that follow from none). */
export const rootCauses = (errors: readonly Pick<ConfigError, 'follows'>[]): number => errors.filter((e) => !e.follows).length;

/**
 * The order errors are shown in, everywhere (validate, plan, apply, the controller), root causes first:
 *
 * 1. problems with a file as a whole and YAML syntax errors, before anything else;
 * 2. then every other error, by file (as loaded: sorted paths) and position;
 * 3. an error that follows from another is not listed on its own: it comes right after its root
 *    cause (those of its own file first), marked `follows` (formatConfigError indents it), and the
 *    root cause counts them (`followers`). It follows from it when:
 *    - it is a later YAML syntax error of the same file as the root cause;
 *    - it is a reference (or metadata.project) naming a document that is not in the loaded set
 *      because of the root cause (a syntax error in it, an unknown kind, no name);
 *    - it is a required field that the root cause, a misspelt or misplaced key of the same
 *      mapping, was meant to be.
 *
 * Every error is kept (counts stay counts of everything); calling it again on its own output,
 * with more errors added, gives the same order.
 */
export function sortErrors(errors: ConfigError[], fileOrder: string[] = []): ConfigError[] {
  const ranks = new Map(fileOrder.map((f, i) => [f, i]));
  const rank = (f: string) => ranks.get(f) ?? Number.MAX_SAFE_INTEGER;
  const flat = errors.map((e) => {
    const { followers: _f, follows: _w, ...rest } = e;
    return rest as ConfigError;
  });
  const byPosition = flat.sort(
    (a, b) =>
      rank(a.file) - rank(b.file) ||
      (a.file < b.file ? -1 : a.file > b.file ? 1 : 0) ||
      (a.line ?? 0) - (b.line ?? 0) ||
      (a.column ?? 0) - (b.column ?? 0),
  );

  // Each error's direct cause: the first error (in position order) that causes what it follows.
  const parent = new Map<ConfigError, ConfigError>();
  const firstSyntax = new Map<string, ConfigError>();
  const causing = new Map<string, ConfigError>();
  for (const e of byPosition) {
    if (e.relation?.syntax) {
      const first = firstSyntax.get(e.file);
      if (first) parent.set(e, first);
      else firstSyntax.set(e.file, e);
    }
    for (const key of e.relation?.causes ?? []) if (!causing.has(key)) causing.set(key, e);
  }
  for (const e of byPosition) {
    if (parent.has(e)) continue;
    for (const key of e.relation?.follows ?? []) {
      const cause = causing.get(key);
      if (cause && cause !== e) {
        parent.set(e, cause);
        break;
      }
    }
  }
  const rootOf = (e: ConfigError): ConfigError => {
    const seen = new Set<ConfigError>([e]);
    let cur = e;
    for (let p = parent.get(cur); p && !seen.has(p); p = parent.get(cur)) {
      seen.add(p);
      cur = p;
    }
    return cur;
  };

  const followersOf = new Map<ConfigError, ConfigError[]>();
  const roots: ConfigError[] = [];
  for (const e of byPosition) {
    const root = rootOf(e);
    if (root === e) {
      roots.push(e);
      continue;
    }
    const list = followersOf.get(root) ?? [];
    list.push(e);
    followersOf.set(root, list);
  }
  const first = (e: ConfigError) => e.line === undefined || e.relation?.syntax === true;
  const ordered = [...roots.filter(first), ...roots.filter((e) => !first(e))];
  const out: ConfigError[] = [];
  for (const root of ordered) {
    // Its own file's first (the rest of the broken document or file), then the others in file order.
    const all = followersOf.get(root) ?? [];
    const followers = [...all.filter((f) => f.file === root.file), ...all.filter((f) => f.file !== root.file)];
    out.push(followers.length ? { ...root, followers: followers.length } : root);
    for (const f of followers) out.push({ ...f, follows: true });
  }
  return out;
}

/** Thrown by functions that cannot go on (toApiBody with an unresolved reference); carries every error. */
export class ConfigValidationError extends Error {
  constructor(readonly errors: ConfigError[]) {
    super(errors.map(formatConfigError).join('\n'));
    this.name = 'ConfigValidationError';
  }
}
