/**
 * How the long-running commands (`dpctl serve`, `dpctl controller`) write their pino logs:
 * `json`, one object a line, for log collectors (the default whenever stdout is not a terminal:
 * a pipe, a file, a container), or `pretty`, one human-readable line each (the default on a
 * terminal). The pretty lines are formatted in the process, synchronously, as pino writes them:
 * no worker thread, nothing lost when the process exits right after logging.
 *
 * Shared by the service and the controller, which do not import each other; it loads no
 * package (the CLI's flag definitions import it, and `--help` must stay light), so the caller
 * hands it pino's destination to write to.
 */

export const LOG_FORMATS = ['json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'silent'] as const;

/** The help text of --log-format. */
export const LOG_FORMAT_HELP =
  'log lines as json (one object a line) or pretty (one human-readable line each); default: pretty when stdout is a terminal, else json';

/** The format asked for, else pretty on a terminal and JSON anywhere else (pipes, files, containers). */
export function resolveLogFormat(format?: string, out: { isTTY?: boolean } = process.stdout): LogFormat {
  if (format === 'json' || format === 'pretty') return format;
  if (format) throw new Error(`log format must be json or pretty, got "${format}"`);
  return out.isTTY ? 'pretty' : 'json';
}

/** Colours only on a terminal, and never with NO_COLOR set (https://no-color.org). */
export function useColor(out: { isTTY?: boolean } = process.stdout): boolean {
  return !!out.isTTY && !process.env.NO_COLOR && process.env.TERM !== 'dumb';
}

interface Sink {
  write(chunk: string): unknown;
}

/** What pino should write to: the destination itself for JSON, a formatting stream in front of it for pretty. */
export function logStream(format: LogFormat, destination: Sink, color = useColor()): Sink {
  if (format === 'json') return destination;
  return {
    write(chunk: string) {
      let text = '';
      for (const line of chunk.split('\n')) if (line) text += formatLogLine(line, color);
      return destination.write(text);
    },
  };
}

const LEVELS: Record<number, [label: string, color: string]> = {
  10: ['TRACE', '90'],
  20: ['DEBUG', '90'],
  30: ['INFO', '32'],
  40: ['WARN', '33'],
  50: ['ERROR', '31'],
  60: ['FATAL', '35'],
};

/** Fields a pretty line shows elsewhere (time, level, name, message, the request's head) or not at all (pid, hostname). */
const SHOWN = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg', 'method', 'url', 'statusCode', 'ms', 'err']);

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

/** A field's value as `key=value` shows it: bare when it is one plain word, else JSON. */
function showValue(value: unknown): string {
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  if (value === null || typeof value !== 'object') return String(value);
  return JSON.stringify(value);
}

/**
 * One pino JSON line as a human-readable one: `12:04:05.123 INFO  controller: new revision revision=sha256:… summary="7 YAML files"`.
 * A request line reads `GET /api/v1/projects 404 3ms tenant=demo actor=user:… reqId=req_…`; an error's
 * stack (service errors at level error and above) follows on indented lines. Not JSON: returned as it came.
 */
export function formatLogLine(line: string, color = false): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(line);
  } catch {
    return line.endsWith('\n') ? line : `${line}\n`;
  }
  if (o === null || typeof o !== 'object') return `${line}\n`;
  const paint = (code: string, text: string) => (color ? `\x1b[${code}m${text}\x1b[0m` : text);
  const level = typeof o.level === 'number' ? o.level : 30;
  const [label, levelColor] = LEVELS[level] ?? [String(o.level), '0'];
  const t = typeof o.time === 'number' ? new Date(o.time) : new Date();
  const time = `${pad(t.getHours())}:${pad(t.getMinutes())}:${pad(t.getSeconds())}.${pad(t.getMilliseconds(), 3)}`;

  const parts: string[] = [];
  if (typeof o.name === 'string') parts.push(`${o.name.replace(/^dpctl-/, '')}:`);
  const msg = typeof o.msg === 'string' ? o.msg : '';
  const isRequest = typeof o.method === 'string' && typeof o.url === 'string';
  // A request line's message ("request") says less than its head does.
  if (msg && !(isRequest && msg === 'request')) parts.push(isRequest ? `${msg}:` : msg);
  if (isRequest) {
    parts.push(`${o.method} ${o.url}`);
    if (o.statusCode !== undefined) parts.push(String(o.statusCode));
    if (typeof o.ms === 'number') parts.push(`${o.ms}ms`);
  }

  let stack = '';
  const err = o.err;
  if (err !== undefined) {
    if (err && typeof err === 'object' && typeof (err as { message?: unknown }).message === 'string') {
      const e = err as { message: string; stack?: unknown };
      parts.push(`${paint('2', 'err=')}${JSON.stringify(e.message)}`);
      if (level >= 50 && typeof e.stack === 'string') {
        const frames = e.stack.split('\n').filter((l) => /^\s+at /.test(l));
        stack = frames.map((f) => `    ${f.trim()}\n`).join('');
      }
    } else {
      parts.push(`${paint('2', 'err=')}${showValue(err)}`);
    }
  }
  // The request id last: it is for looking a line up, not for reading.
  const fields = Object.entries(o).filter(([key, value]) => !SHOWN.has(key) && value !== undefined);
  for (const [key, value] of [...fields.filter(([k]) => k !== 'reqId'), ...fields.filter(([k]) => k === 'reqId')])
    parts.push(`${paint('2', `${key}=`)}${showValue(value)}`);
  // Not the request fields of a line that is no request (a lone `url`, e.g. the status listener's).
  if (!isRequest) {
    for (const key of ['method', 'url', 'statusCode', 'ms'] as const)
      if (o[key] !== undefined) parts.push(`${paint('2', `${key}=`)}${showValue(o[key])}`);
  }
  return `${paint('2', time)} ${paint(levelColor, label.padEnd(5))} ${parts.join(' ')}\n${stack}`;
}
