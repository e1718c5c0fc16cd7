import pino, { type Logger } from 'pino';

/**
 * The controller's JSON log: synchronous lines on stdout (nothing is lost when the process
 * exits right after), and credentials censored should a field carrying one ever be logged.
 */
export function controllerLogger(level: string): Logger {
  return pino(
    { name: 'dpctl-controller', level, redact: { paths: ['password', 'apiKey', 'token', 'secret', '*.password', '*.apiKey', '*.token', '*.secret'], censor: '[redacted]' } },
    pino.destination({ fd: 1, sync: true }),
  );
}
