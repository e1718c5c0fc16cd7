import { RE2JS, RE2JSException } from 're2js';

/**
 * User-supplied regular expressions (classification patterns, anything with `x-format: regex`)
 * are compiled and run by re2js, a pure-JS port of RE2: no backtracking, so matching is linear
 * in the input whatever the pattern (`(a+)+$` is as cheap as `a`). The syntax is RE2's, which
 * has no backreferences and no lookaround; those are refused when the pattern is saved.
 *
 * Linear is not free: a pattern's program size multiplies the cost of every match, and
 * compiling a huge program costs tens of milliseconds. So a pattern is also bounded in length
 * and in compiled size, and an estimate of that size is checked before compiling at all.
 */

/** Longest pattern accepted, in characters (also the schemas' maxLength for patterns). */
export const MAX_PATTERN_LENGTH = 512;
/** Largest compiled program accepted, in RE2 instructions (a{1000} alone is 1,002). */
export const MAX_PROGRAM_SIZE = 1_000;
/**
 * All the patterns of one validated document (one classification) together, in instructions:
 * bounds the compile work of one request (100 matchers x 3 patterns at the per-pattern limit
 * would take 0.2-0.5 s) and the cost of matching every column against the classification.
 */
export const MAX_DOCUMENT_PROGRAM_SIZE = 20_000;
/**
 * The longest input matched, in characters: longer input is matched on its first this many.
 * Linear has a constant that grows with the input: re2js's DFA cache thrashes on long input, so
 * `a.{200}c` took 0.02 ms on 1,024 characters, 0.34 ms on 4,096 and 660 ms on 100,000, in one
 * call that cannot yield (a 1 MB table name froze the service for 28 s). Names of real sources are
 * far shorter (PostgreSQL's at most 63 bytes), and the schemas cap the ones tenants write at 256.
 */
export const MAX_MATCHED_INPUT = 1_024;

const bounded = (input: string) => (input.length > MAX_MATCHED_INPUT ? input.slice(0, MAX_MATCHED_INPUT) : input);

export interface SafeRegex {
  /** Case-insensitive; searches the input (its first MAX_MATCHED_INPUT characters), or must match all of it when compiled `whole`. */
  test(input: string): boolean;
  /** Compiled program size, in RE2 instructions. */
  size: number;
}

export class RegexPatternError extends Error {}

/** Why a pattern is refused (phrased to follow the field name), or null when it is accepted. */
export function safeRegexError(pattern: string): string | null {
  try {
    compileSafeRegex(pattern);
    return null;
  } catch (err) {
    if (err instanceof RegexPatternError) return err.message;
    throw err;
  }
}

/** Sizes of the patterns accepted so far, per validated document and path. */
const spentByDocument = new WeakMap<object, Map<string, number>>();

/**
 * Like safeRegexError, and also counts the pattern against MAX_DOCUMENT_PROGRAM_SIZE for the
 * document it is part of (by path, so validating the same document twice counts it once).
 * Once the budget is spent, further patterns are refused without being compiled.
 */
export function documentPatternError(pattern: string, document: object, path: string): string | null {
  const sizes = spentByDocument.get(document) ?? new Map<string, number>();
  spentByDocument.set(document, sizes);
  sizes.delete(path);
  let spent = 0;
  for (const size of sizes.values()) spent += size;
  const overBudget = `is too complex: the patterns of this document together compile to more than ${MAX_DOCUMENT_PROGRAM_SIZE} instructions`;
  if (spent >= MAX_DOCUMENT_PROGRAM_SIZE) return overBudget;
  try {
    const { size } = compileSafeRegex(pattern);
    if (spent + size > MAX_DOCUMENT_PROGRAM_SIZE) return overBudget;
    sizes.set(path, size);
    return null;
  } catch (err) {
    if (err instanceof RegexPatternError) return err.message;
    throw err;
  }
}

/** Compiles a pattern with RE2 semantics, case-insensitive. Throws RegexPatternError when refused. */
export function compileSafeRegex(pattern: string, options: { whole?: boolean } = {}): SafeRegex {
  // Same wording as Ajv's maxLength, so a schema that has both reports it once.
  if (pattern.length > MAX_PATTERN_LENGTH) throw new RegexPatternError(`must NOT have more than ${MAX_PATTERN_LENGTH} characters`);
  const tooComplex = (size: string) =>
    new RegexPatternError(
      `is too complex: it compiles to ${size} instructions, more than ${MAX_PROGRAM_SIZE} (use fewer or smaller counted repetitions like {n,m})`,
    );
  // Compiling costs about a microsecond per instruction: do not pay it for what is clearly too big.
  const estimate = estimateProgramSize(pattern);
  if (estimate > 2 * MAX_PROGRAM_SIZE) throw tooComplex(`about ${estimate}`);
  let re: RE2JS;
  try {
    re = RE2JS.compile(pattern, RE2JS.CASE_INSENSITIVE);
  } catch (err) {
    if (!(err instanceof RE2JSException)) throw err;
    let reason = err.message.replace(/^error parsing regexp: /, '');
    // re2js quotes the pattern with the (?i) it prepends for the flag: show what the user wrote.
    if (!pattern.startsWith('(?i)')) reason = reason.replace('`(?i)', '`');
    throw new RegexPatternError(`is not a valid regular expression (RE2 syntax: no backreferences or lookaround): ${reason}`);
  }
  if (re.programSize() > MAX_PROGRAM_SIZE) throw tooComplex(String(re.programSize()));
  const size = re.programSize();
  return options.whole ? { size, test: (input) => re.testExact(bounded(input)) } : { size, test: (input) => re.test(bounded(input)) };
}

/**
 * A cheap upper estimate of RE2's program size, read from the text without compiling: every
 * atom counts one, a group counts its content plus two, and a counted repetition {n,m}
 * multiplies what it repeats by n + 2(m-n) (RE2 emits each optional copy with a branch).
 * It only has to be roughly right and never far below (nesting makes it overshoot): patterns
 * under twice the limit are compiled and judged by their real size, and RE2 judges the syntax.
 */
export function estimateProgramSize(pattern: string): number {
  const frames: { total: number; last: number }[] = [];
  let cur = { total: 0, last: 0 };
  const atom = (size: number) => {
    cur.total += size;
    cur.last = size;
  };
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') {
      // \p{Greek}, \x{263a}: skip the braces; other escapes are one character.
      i = /[pPx]/.test(pattern[i + 1] ?? '') && pattern[i + 2] === '{' ? closing(pattern, i + 2, '}') : i + 1;
      atom(1);
    } else if (c === '[') {
      i = classEnd(pattern, i);
      atom(1);
    } else if (c === '(') {
      frames.push(cur);
      cur = { total: 0, last: 0 };
    } else if (c === ')') {
      const inner = cur.total + 2;
      cur = frames.pop() ?? { total: 0, last: 0 };
      atom(inner);
    } else if (c === '{' && /^\{\d+(,\d*)?\}/.test(pattern.slice(i, i + 16))) {
      const [, n, comma, m] = /^\{(\d+)(,?)(\d*)\}/.exec(pattern.slice(i, i + 16))!;
      const min = Number(n);
      const times = Math.max(1, !comma ? min : m === '' ? min + 1 : min + 2 * Math.max(0, Number(m) - min));
      cur.total += cur.last * (times - 1);
      cur.last *= times;
      i = closing(pattern, i, '}');
    } else if (c === '|' || c === '*' || c === '+' || c === '?') {
      cur.total += 1;
    } else {
      atom(1);
    }
  }
  while (frames.length) cur = { total: frames.pop()!.total + cur.total + 2, last: 0 };
  return cur.total;
}

/** Index of the first `close` at or after `from` (the end of the pattern when there is none). */
function closing(pattern: string, from: number, close: string): number {
  const at = pattern.indexOf(close, from);
  return at === -1 ? pattern.length : at;
}

/** Index of the `]` that ends the class opened at `open` ([]a], [^]a], [[:alpha:]x], [\]]). */
function classEnd(pattern: string, open: number): number {
  let i = open + 1;
  if (pattern[i] === '^') i++;
  if (pattern[i] === ']') i++;
  for (; i < pattern.length; i++) {
    if (pattern[i] === '\\') i++;
    else if (pattern.startsWith('[:', i)) i = closing(pattern, i + 2, ':]') + 1;
    else if (pattern[i] === ']') return i;
  }
  return pattern.length;
}
