/**
 * Whether an error says the database cannot be reached at all (refused, dropped, shutting down,
 * out of connections), rather than that one statement failed. Background loops use it to report an
 * outage once instead of a stack per loop every few seconds.
 */

/** Socket errors of the driver's connection. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EPIPE',
  'EAI_AGAIN',
]);
/**
 * PostgreSQL's SQLSTATEs for a server going away or refusing connections (class 08 is checked
 * whole): shutting down or starting up, out of connections, the database gone, the login refused.
 */
const SERVER_CODES = new Set(['57P01', '57P02', '57P03', '53300', '3D000', '28000', '28P01']);
/** node-postgres raises the first three without a code; the last is 55000 (ALLOW_CONNECTIONS false), a code used for much else. */
const DRIVER_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error',
  'is not currently accepting connections',
];

export function isDatabaseUnavailable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && (NETWORK_CODES.has(code) || SERVER_CODES.has(code) || /^08[0-9A-Z]{3}$/.test(code))) return true;
    if (DRIVER_MESSAGES.some((m) => e instanceof Error && e.message.includes(m))) return true;
    // AggregateError of a connect to several addresses (localhost: ::1 and 127.0.0.1).
    if (e instanceof AggregateError && e.errors.some((inner) => isDatabaseUnavailable(inner))) return true;
  }
  return false;
}
