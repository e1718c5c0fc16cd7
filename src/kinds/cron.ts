import { CronExpressionParser } from 'cron-parser';

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
  if (fields.length !== 5) return `must be a five-field cron expression (minute hour day-of-month month day-of-week), got ${fields.length} field(s)`;
  try {
    CronExpressionParser.parse(fields.join(' '), { tz: 'UTC' });
    return null;
  } catch (err) {
    return `is not a valid cron expression: ${(err as Error).message}`;
  }
}

/** The server's normal form: single spaces, no surrounding blanks. Clients diff against this. */
export const normalizeCron = (expression: string) => expression.trim().split(/\s+/).join(' ');

export function nextCronTime(expression: string, after: Date): Date {
  return CronExpressionParser.parse(expression, { tz: 'UTC', currentDate: after }).next().toDate();
}
