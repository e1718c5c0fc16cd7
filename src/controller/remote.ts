import { readFileSync } from 'node:fs';
import { maxOf } from '../collections.js';
import { parseDuration } from './duration.js';
import { durationText, plural, relativeTime, shortRevision } from './status-format.js';
import type { ControllerStatus, LastRun, ResourceStatus, RunRecord } from './status.js';
import { PROBLEMS, resourceCounts, type StatusSummary } from './status-summary.js';

/**
 * `dpctl controller status|suspend|resume|reconcile`: the client side, talking to a running
 * controller's status listener as `flux get|suspend|resume|reconcile` talks to Flux. Loaded only
 * when one of them runs (cli.ts). Uses Node's own fetch: nothing else to load.
 */

export type RemoteCommand = 'status' | 'suspend' | 'resume' | 'reconcile';

export interface RemoteOpts {
  /** The listener (default DPCTL_CONTROLLER_URL, else http://127.0.0.1:9090). */
  url?: string;
  /** The webhook secret's file (default DPCTL_WEBHOOK_SECRET_FILE, else DPCTL_WEBHOOK_SECRET). */
  webhookSecretFile?: string;
  output?: 'text' | 'json';
  /** reconcile: how long to wait for the run's outcome (default 5m). */
  timeout?: string;
}

/** A failure to report as `dpctl: <message>`, exit 1. */
export class RemoteError extends Error {
  override name = 'RemoteError';
}

export const DEFAULT_CONTROLLER_URL = 'http://127.0.0.1:9090';
/** One request: a listener that does not answer within this is reported, not waited for. */
const REQUEST_TIMEOUT_MS = 15_000;
/** How often `reconcile` reads /status.json while it waits. */
const POLL_MS = 500;

interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
}
const processIo: Io = { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) };

/** Runs one command; resolves with the exit code (0 success, 1 failure). Throws RemoteError for the caller to print. */
export async function runRemote(command: RemoteCommand, opts: RemoteOpts, io: Io = processIo): Promise<number> {
  const base = controllerUrl(opts.url);
  const json = opts.output === 'json';
  switch (command) {
    case 'status': {
      // JSON is the whole status, as before; the text needs the summary only.
      const { status, now } = await getStatus(base, json ? 'whole' : 'summary');
      io.out(json ? `${JSON.stringify(status, null, 2)}\n` : formatStatus(status, now));
      return 0;
    }
    case 'suspend':
    case 'resume': {
      const answer = (await post(base, `/${command}`, webhookSecret(opts))) as { suspended?: boolean };
      if (json) io.out(`${JSON.stringify(answer)}\n`);
      else if (answer.suspended)
        io.out(
          `suspended: the controller at ${base}, and the replicas it elects a leader with, fetch and apply nothing until \`dpctl controller resume\` (it stays suspended across restarts and leader changes)\n`,
        );
      else io.out(`resumed: the controller at ${base} and its replicas reconcile again, the leader starting with a run now\n`);
      return 0;
    }
    case 'reconcile':
      return reconcile(base, opts, io);
  }
}

/** `--url`, else DPCTL_CONTROLLER_URL, else the default listener; checked, without a trailing slash. */
export function controllerUrl(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  const text = (flag ?? (env.DPCTL_CONTROLLER_URL || undefined) ?? DEFAULT_CONTROLLER_URL).trim();
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  if (!url || !/^https?:$/.test(url.protocol))
    throw new RemoteError(
      `--url must be the controller's listener as an http(s) URL, e.g. ${DEFAULT_CONTROLLER_URL}; got ${JSON.stringify(text)}`,
    );
  return text.replace(/\/+$/, '');
}

/** The secret the controller itself reads: --webhook-secret-file, else DPCTL_WEBHOOK_SECRET_FILE, else DPCTL_WEBHOOK_SECRET. */
export function webhookSecret(opts: RemoteOpts, env: NodeJS.ProcessEnv = process.env): string {
  const file = opts.webhookSecretFile ?? (env.DPCTL_WEBHOOK_SECRET_FILE || undefined);
  if (file) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new RemoteError(
        `--webhook-secret-file ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`,
      );
    }
    const value = text.replace(/\r?\n$/, '');
    if (!value) throw new RemoteError(`--webhook-secret-file ${file} is empty`);
    return value;
  }
  const value = env.DPCTL_WEBHOOK_SECRET;
  if (value) return value;
  throw new RemoteError(
    "this needs the controller's webhook secret: give --webhook-secret-file FILE, or set DPCTL_WEBHOOK_SECRET_FILE or DPCTL_WEBHOOK_SECRET",
  );
}

async function request(base: string, path: string, init: RequestInit = {}): Promise<Response> {
  try {
    return await fetch(`${base}${path}`, { ...init, redirect: 'manual', signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  } catch (err) {
    const e = err as Error & { cause?: NodeJS.ErrnoException };
    const why =
      e.name === 'TimeoutError' ? `no answer within ${REQUEST_TIMEOUT_MS / 1000} s` : (e.cause?.code ?? e.cause?.message ?? e.message);
    throw new RemoteError(
      `cannot reach the controller at ${base} (${why}); is it running, and is --url (or DPCTL_CONTROLLER_URL) its --listen address?`,
    );
  }
}

/** The listener's error envelope as a message that says what to do. */
async function failure(res: Response, path: string): Promise<RemoteError> {
  const text = await res.text().catch(() => '');
  let code = '';
  let message = text.slice(0, 300);
  try {
    const e = (JSON.parse(text) as { error?: { code?: string; message?: string } }).error;
    code = e?.code ?? '';
    message = e?.message ?? message;
  } catch {
    // Not the controller's JSON (a proxy's page): keep the text.
  }
  const action = path.slice(1);
  switch (res.status) {
    case 401:
      return new RemoteError(
        `the controller refused the webhook secret (401 unauthorized): check --webhook-secret-file, DPCTL_WEBHOOK_SECRET_FILE or DPCTL_WEBHOOK_SECRET`,
      );
    case 403:
      return new RemoteError(
        `${action} is off on this controller (403 ${code || 'forbidden'}): it was started without a webhook secret (--webhook-secret-file, DPCTL_WEBHOOK_SECRET)`,
      );
    case 503:
      return new RemoteError(
        code === 'no_leader' ? `no leader to ${action} (503): ${message}` : `the controller cannot ${action} now (503 ${code}): ${message}`,
      );
    case 404:
      return new RemoteError(
        `${res.url || path} is not there (404): is --url a dpctl controller's listener (and one recent enough to have ${path})?`,
      );
    default:
      return new RemoteError(`${action}: the controller answered ${res.status}${code ? ` ${code}` : ''}: ${message}`);
  }
}

async function getStatus(base: string, view: 'whole' | 'summary' = 'summary'): Promise<{ status: ControllerStatus; now: number }> {
  // The summary: the whole status is tens of MB at 100,000 resources (an older controller ignores the parameter).
  const res = await request(base, view === 'summary' ? '/status.json?view=summary' : '/status.json', { headers: { accept: 'application/json' } });
  if (!res.ok) throw await failure(res, '/status.json');
  const status = (await res.json().catch(() => undefined)) as ControllerStatus | undefined;
  if (!status?.controller || !Array.isArray(status.recent_runs))
    throw new RemoteError(`${base}/status.json is not a dpctl controller's status`);
  // Ages by the controller's clock (its Date header), so a client whose clock is off reads them right.
  // The header is cut to the second, so the controller's time lies in [date, date + 1 s): its middle
  // keeps the error under half a second, and a run that just ended never reads "in 1 s".
  const date = Date.parse(res.headers.get('date') ?? '');
  return { status, now: Number.isNaN(date) ? Date.now() : date + 500 };
}

async function post(base: string, path: string, secret: string): Promise<unknown> {
  const res = await request(base, path, { method: 'POST', headers: { authorization: `Bearer ${secret}`, accept: 'application/json' } });
  if (!res.ok) throw await failure(res, path);
  return res.json().catch(() => ({}));
}

/** A duration as the flags take it: `500ms`, `30s`, `5m`, `1h` (else `90s`-style seconds). */
export const flagDuration = (ms: number): string =>
  ms % 3_600_000 === 0 ? `${ms / 3_600_000}h` : ms % 60_000 === 0 ? `${ms / 60_000}m` : ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The run asked for: one triggered by `reconcile` that started at or after the request (by the controller's clock), the oldest such. */
export function runAfter(status: ControllerStatus, requestedAt: string): RunRecord | LastRun | undefined {
  const asked = Date.parse(requestedAt);
  // A run already under way when the request came finishes first, under its own trigger: it started before.
  // Any run that started strictly later fetched after the request too (a webhook may have replaced the trigger).
  const matches = (r: { trigger: string; started_at: string }) => {
    const started = Date.parse(r.started_at);
    return (r.trigger === 'reconcile' && started >= asked) || started > asked;
  };
  const run = [...status.recent_runs].reverse().find(matches);
  if (!run) return undefined;
  const last = status.last_run;
  // The newest run is last_run too, with all its errors.
  return last && last.started_at === run.started_at && last.trigger === run.trigger ? last : run;
}

const SUCCESS = new Set(['converged', 'in-sync']);

async function reconcile(base: string, opts: RemoteOpts, io: Io): Promise<number> {
  const timeoutMs = (() => {
    try {
      return parseDuration(opts.timeout ?? '5m', '--timeout');
    } catch (err) {
      throw new RemoteError((err as Error).message);
    }
  })();
  const json = opts.output === 'json';
  const answer = (await post(base, '/reconcile', webhookSecret(opts))) as { requested_at?: string };
  const requestedAt = answer.requested_at;
  if (!requestedAt || Number.isNaN(Date.parse(requestedAt)))
    throw new RemoteError(
      `the controller at ${base} accepted the request but did not say when (no requested_at): cannot tell its run apart`,
    );
  if (!json) io.err(`reconcile requested (${requestedAt}); waiting for the run (up to ${flagDuration(timeoutMs)})\n`);
  const deadline = Date.now() + timeoutMs;
  let standby = 0;
  for (;;) {
    const { status } = await getStatus(base);
    const run = runAfter(status, requestedAt);
    if (run) {
      const ok = SUCCESS.has(run.result);
      io.out(json ? `${JSON.stringify({ requested_at: requestedAt, run }, null, 2)}\n` : formatRun(run));
      return ok ? 0 : 1;
    }
    // Behind a Service the listener may be a standby: the leader ran it, but this status will never show it.
    standby = status.controller.leader.elected ? 0 : standby + 1;
    if (standby >= 3) {
      throw new RemoteError(
        `the run was requested from the leader, but ${base} is a standby replica (${status.controller.leader.identity}, ${status.controller.leader.election}) whose status does not show the leader's runs: point --url at the leader to wait for the outcome`,
      );
    }
    if (Date.now() >= deadline) {
      throw new RemoteError(
        `no run requested at ${requestedAt} finished within ${flagDuration(timeoutMs)} (last run: ${status.last_run ? `${status.last_run.trigger}, ${status.last_run.result}, started ${status.last_run.started_at}` : 'none'}); \`dpctl controller status\` shows where it is`,
      );
    }
    await sleep(Math.min(POLL_MS, Math.max(0, deadline - Date.now())));
  }
}

const plan = (s: Record<string, number>) => {
  const parts = [
    ['create', 'to create'],
    ['update', 'to update'],
    ['replace', 'to replace'],
    ['delete', 'to delete'],
    ['no_op', 'unchanged'],
    ['unsupported', 'not supported'],
  ]
    .filter(([k]) => s[k])
    .map(([k, word]) => `${s[k]} ${word}`);
  return parts.length ? parts.join(', ') : 'nothing planned';
};

/** A finished run: result, duration, revision, plan, errors. */
export function formatRun(run: RunRecord | LastRun): string {
  const lines = [
    `run ${run.result} in ${durationText(run.duration_ms)} (trigger ${run.trigger}, revision ${run.revision ? shortRevision(run.revision) : '-'}, started ${run.started_at})`,
    `plan: ${plan(run.summary ?? {})}`,
  ];
  const errors = 'errors' in run ? run.errors : run.first_error ? [run.first_error] : [];
  const count = 'errors' in run ? run.errors.length : run.error_count;
  if (count) lines.push(`${plural(count, 'error')}:`, ...errors.map((e) => `  ${e}`));
  if (count > errors.length) lines.push(`  ... ${count - errors.length} more: dpctl controller status --output json`);
  const warnings = 'errors' in run ? (run.warnings ?? []) : [];
  if (warnings.length) lines.push(`${plural(warnings.length, 'warning')}:`, ...warnings.map((w) => `  ${w}`));
  else if ('warning_count' in run && run.warning_count) lines.push(`${plural(run.warning_count, 'warning')}: dpctl controller status --output json`);
  return `${lines.join('\n')}\n`;
}

/** Left-aligned columns, two spaces apart, like kubectl and flux. */
function table(rows: string[][]): string[] {
  const widths = rows[0].map((_, i) => maxOf(rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]))).join('  '));
}

const STATE_ORDER: ResourceStatus['state'][] = [
  'in-sync',
  'applied',
  'drifted',
  'progressing',
  'pending',
  'degraded',
  'failed',
  'backoff',
  'skipped',
  'unsupported',
];

/**
 * The status as `flux get kustomizations` shows one: a row (ready, reason, suspended, revision
 * in force and last converged, last run), then the leader, the resources by state, and one line
 * per resource in trouble. `now`: the controller's clock, for ages.
 */
export function formatStatus(s: ControllerStatus, now: number): string {
  const ready = s.conditions.find((c) => c.type === 'Ready');
  const run = s.last_run;
  const lastRun = run
    ? `${run.result} ${relativeTime(Date.parse(run.finished_at), now)}, took ${durationText(run.duration_ms)} (${run.trigger})`
    : '-';
  const rev = (r: { id: string } | null) => (r ? shortRevision(r.id) : '-');
  const lines = table([
    ['NAME', 'READY', 'REASON', 'SUSPENDED', 'REVISION', 'CONVERGED', 'LAST RUN'],
    [
      s.controller.source_id,
      ready?.status ?? 'Unknown',
      ready?.reason ?? '-',
      s.controller.suspended ? 'True' : 'False',
      rev(s.revision.applied),
      rev(s.revision.converged),
      lastRun,
    ],
  ]);
  lines.push('');
  if (ready?.message) lines.push(`Message:    ${ready.message}`);
  const l = s.controller.leader;
  lines.push(
    `Leader:     ${l.elected ? `${l.identity} (this replica leads; ${l.election})` : `standby ${l.identity} (${l.election}): the leader's runs are in the leader's status`}`,
  );
  lines.push(
    `Source:     ${s.controller.source} (${s.controller.mode} mode, every ${flagDuration(s.controller.interval_ms)}${s.controller.prune ? ', prune' : ''})`,
  );
  if (s.revision.applied?.summary) lines.push(`Revision:   ${shortRevision(s.revision.applied.id)} ${s.revision.applied.summary}`);
  if (s.revision.invalid)
    lines.push(
      `Invalid:    ${shortRevision(s.revision.invalid.id)} not applied: ${s.revision.invalid.errors[0] ?? ''}${s.revision.invalid.errors.length > 1 ? ` (+${s.revision.invalid.errors.length - 1} more)` : ''}`,
    );
  if (s.revision.fetch_error) lines.push(`Fetch:      failed: ${s.revision.fetch_error}`);
  // The summary view counts the rows it leaves out; a whole status (an older controller) is counted here.
  const summary = (s as Partial<StatusSummary>).resource_counts ?? resourceCounts(s);
  const counts = new Map(Object.entries(summary.by_state));
  const byState = [...STATE_ORDER, ...[...counts.keys()].filter((k) => !STATE_ORDER.includes(k as ResourceStatus['state']))]
    .filter((state) => counts.get(state))
    .map((state) => `${counts.get(state)} ${state}`);
  // A run that prunes lists what it deleted beside what is declared.
  const { declared, pruned } = summary;
  lines.push(`Resources:  ${declared + pruned ? `${byState.join(', ')} (${declared} declared${pruned ? `, ${pruned} pruned` : ''})` : 'none yet'}`);
  const warnings = s.last_run?.warnings ?? [];
  if (warnings.length) lines.push('Warnings:', ...warnings.map((w) => `  ${w}`));
  const problems = s.resources.filter((r) => PROBLEMS.has(r.state));
  if (problems.length) {
    lines.push('Problems:');
    const width = maxOf(problems.map((r) => r.state.length));
    for (const r of problems) {
      const retry = r.next_attempt_at ? ` (attempt ${(r.failures ?? 0) + 1} ${relativeTime(Date.parse(r.next_attempt_at), now)})` : '';
      lines.push(
        `  ${r.state.padEnd(width)}  ${r.yaml_kind} ${r.project ? `${r.project}/` : ''}${r.name}: ${r.detail ?? r.health_reason ?? ''}${retry}`,
      );
    }
  }
  return `${lines.join('\n')}\n`;
}
