import { errorLines, formatConfigError, markRelation, type ConfigError } from '../config/index.js';
import type { ProblemCode } from '../kinds/errors.js';

/**
 * A problem that keeps a plan from being applied, as a value: its code (kinds/errors.ts), what it
 * is about (`Kind/name`), where it is written when it comes from a document, and the message.
 * The engine never formats one: the CLI, the controller and the provider do, where they show it
 * (formatProblem), and group or count by `code`.
 */
export interface Problem extends Omit<ConfigError, 'file' | 'relation'> {
  code: ProblemCode;
  /** The file, when the problem is at a place in the configuration (then `line`, `column` too). */
  file?: string;
}

/** `file:line:column: Kind/name: field: message`, or `Kind/name: message` for a problem with no place. */
export function formatProblem(p: Problem): string {
  if (p.file !== undefined) return formatConfigError(p as ConfigError);
  return markRelation(p, [p.subject, p.field, p.message].filter((part) => part !== undefined && part !== '').join(': '));
}

export const formatProblems = (problems: readonly Problem[]): string[] => problems.map(formatProblem);

/**
 * The lines a terminal shows: `error: ` before each root cause, the problems that follow from it
 * indented under it, the first few and a count when many (as dpctl validate shows config errors).
 */
export const problemLines = (problems: readonly Problem[], prefix = 'error: '): string[] =>
  errorLines(problems.map((p) => ({ text: p.follows ? formatProblem(p) : `${prefix}${formatProblem(p)}`, follows: p.follows === true })));

/** How many problems of each code, for summaries and metrics. */
export function countByCode(problems: readonly Problem[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const p of problems) counts[p.code] = (counts[p.code] ?? 0) + 1;
  return counts;
}
