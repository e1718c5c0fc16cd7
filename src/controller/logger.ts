import pino, { type Logger } from 'pino';
import { logStream, resolveLogFormat, type LogFormat } from '../log-format.js';

/**
 * The controller's log: synchronous lines on stdout (nothing is lost when the process exits
 * right after), JSON or one human-readable line each (src/log-format.ts; default: pretty on a
 * terminal, JSON anywhere else), and credentials censored should a field carrying one ever be logged.
 */
export function controllerLogger(level: string, format?: LogFormat | string): Logger {
  return pino(
    {
      name: 'dpctl-controller',
      level,
      redact: { paths: ['password', 'apiKey', 'token', 'secret', '*.password', '*.apiKey', '*.token', '*.secret'], censor: '[redacted]' },
    },
    logStream(resolveLogFormat(format), pino.destination({ fd: 1, sync: true })) as pino.DestinationStream,
  );
}
