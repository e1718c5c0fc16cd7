/**
 * Timestamps as the API accepts them: RFC 3339 `date-time` with a zone, restricted to what
 * the store and JavaScript can hold. ajv-formats accepts a leap second (`23:59:60`), which
 * `Date` cannot represent (Date.parse gives NaN, and toISOString then throws: a 500), and
 * year 0000, whose ISO form sorts wrongly against stored ones. One parser decides for every
 * surface: the `date-time` format of every Ajv instance (bodies, query parameters, YAML,
 * provider) and the code that turns an accepted value into the stored form.
 */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

/** Milliseconds since the epoch of the earliest and latest instants the store's ISO strings order correctly. */
const MIN_MS = utc(1, 1, 1, 0, 0, 0, 0);
const MAX_MS = utc(9999, 12, 31, 23, 59, 59, 999);

function utc(year: number, month: number, day: number, hour: number, minute: number, second: number, ms: number): number {
  const d = new Date(0);
  // setUTCFullYear, unlike Date.UTC, does not map years 0-99 to 1900-1999.
  d.setUTCFullYear(year, month - 1, day);
  d.setUTCHours(hour, minute, second, ms);
  return d.getTime();
}

const daysIn = (year: number, month: number) =>
  month === 2 ? (year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31;

/** Why `value` is not an accepted timestamp, or null when it is. */
export function timestampError(value: string): string | null {
  const m = RFC3339.exec(value);
  if (!m) return 'must be an RFC 3339 date-time with a zone, e.g. 2024-05-01T12:00:00Z';
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  if (year < 1) return 'must have a year from 0001 to 9999';
  if (month < 1 || month > 12) return 'must have a month from 01 to 12';
  if (day < 1 || day > daysIn(year, month)) return `must have a day that exists in ${m[1]}-${m[2]}`;
  if (hour > 23) return 'must have an hour from 00 to 23 (24:00 is written as 00:00 of the next day)';
  if (minute > 59) return 'must have minutes from 00 to 59';
  if (second > 59) return 'must have seconds from 00 to 59 (leap seconds are not supported)';
  if (m[8] && (Number(m[9]) > 23 || Number(m[10]) > 59)) return 'must have a zone offset from -23:59 to +23:59';
  const ms = toMs(m);
  if (ms < MIN_MS || ms > MAX_MS) return 'must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z';
  return null;
}

function toMs(m: RegExpExecArray): number {
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  const millis = Number((m[7] ?? '').padEnd(3, '0').slice(0, 3));
  const offsetMinutes = m[8] ? (m[8] === '-' ? -1 : 1) * (Number(m[9]) * 60 + Number(m[10])) : 0;
  return utc(year, month, day, hour, minute, second, millis) - offsetMinutes * 60_000;
}

/** The `date-time` format check used by every Ajv instance. */
export const isTimestamp = (value: string): boolean => timestampError(value) === null;

/**
 * The stored form (UTC, millisecond ISO string, as the service writes its own timestamps) of
 * a timestamp that validation accepted; throws on one it did not, which would be a bug.
 */
export function toStoredTimestamp(value: string): string {
  const error = timestampError(value);
  if (error) throw new Error(`not a valid timestamp (${error}): ${JSON.stringify(value)}`);
  return new Date(toMs(RFC3339.exec(value)!)).toISOString();
}
