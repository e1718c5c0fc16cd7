import { createRequire } from 'node:module';
import { CronExpressionParser, type CronExpression } from 'cron-parser';
import type { Settings as LuxonSettings } from 'luxon';

const require = createRequire(import.meta.url);
// luxon ships an ES and a CommonJS build, two instances with their own settings. cron-parser is
// CommonJS and requires the CommonJS one, so that is the one whose locale is fixed below (an
// `import` of luxon here got the ES build, and cron-parser still asked ICU for the locale).
const { Settings } = require('luxon') as { Settings: typeof LuxonSettings };

/**
 * `use` applied to a UTC expression parsed at `currentDate` (epoch ms; the epoch when only
 * checking). cron-parser computes with luxon, whose first date asks ICU for the system's locale and
 * time zone: 10-25 ms of a fresh `dpctl plan` for formatting we never do. Here the zone is always
 * UTC and, while the parse and `use` run (synchronously), the locale a fixed one; luxon's setting
 * is put back, so an application that embeds us and uses luxon sees no change.
 */
function inUtc<T>(expression: string, currentDate: number, use: (parsed: CronExpression) => T): T {
  const prior = Settings.defaultLocale;
  Settings.defaultLocale = 'en-US';
  try {
    return use(CronExpressionParser.parse(expression, { tz: 'UTC', currentDate }));
  } finally {
    Settings.defaultLocale = prior;
  }
}

const checked = new Map<string, string | null>();

/** Checks a five-field cron expression (minute hour day-of-month month day-of-week). Returns an error message or null. */
export function cronError(expression: string): string | null {
  let result = checked.get(expression);
  if (result === undefined) {
    result = checkCron(expression);
    if (checked.size > 10_000) checked.clear();
    checked.set(expression, result);
  }
  return result;
}

function checkCron(expression: string): string | null {
  const fields = expression.trim().split(/\s+/);
  if (fields.length !== 5)
    return `must be a five-field cron expression (minute hour day-of-month month day-of-week), got ${fields.length} field(s)`;
  try {
    inUtc(fields.join(' '), 0, () => undefined);
    return null;
  } catch (err) {
    return `is not a valid cron expression: ${(err as Error).message}`;
  }
}

/** The server's normal form: single spaces, no surrounding blanks. Clients diff against this. */
export const normalizeCron = (expression: string) => expression.trim().split(/\s+/).join(' ');

export function nextCronTime(expression: string, after: Date): Date {
  return inUtc(expression, after.getTime(), (parsed) => parsed.next().toDate());
}

/**
 * Tick arithmetic for the scheduler, memoised. cron-parser costs up to ~1.5 ms for one next() or
 * prev() of a sparse expression (yearly `0 0 1 1 *`: it walks day by day), so the answer is kept per
 * (expression, minute): ticks fall on whole minutes, so every instant of one minute has the same
 * next tick and the same latest tick. Many resources share a schedule and a due minute, so a due
 * wave of identical schedules costs one computation.
 */
const MINUTE = 60_000;
const TICK_CACHE_MAX = 20_000;
const nextCache = new Map<string, number>();
const latestCache = new Map<string, number>();

function memo(cache: Map<string, number>, key: string, compute: () => number): number {
  let value = cache.get(key);
  if (value === undefined) {
    value = compute();
    if (cache.size >= TICK_CACHE_MAX) cache.clear();
    cache.set(key, value);
  }
  return value;
}

/** The first tick strictly after `afterMs` (epoch ms) of a five-field UTC expression. Throws on an invalid one. */
export function nextTickAfter(expression: string, afterMs: number): number {
  const minute = Math.floor(afterMs / MINUTE) * MINUTE;
  return memo(nextCache, `${expression}\u0000${minute}`, () => inUtc(expression, minute, (parsed) => parsed.next().getTime()));
}

/** The latest tick at or before `atMs`. Throws on an invalid expression. */
export function latestTickAt(expression: string, atMs: number): number {
  const minute = Math.floor(atMs / MINUTE) * MINUTE;
  return memo(latestCache, `${expression}\u0000${minute}`, () => inUtc(expression, minute + 1, (parsed) => parsed.prev().getTime()));
}
