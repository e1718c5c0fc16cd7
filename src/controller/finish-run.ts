import type { Logger } from 'pino';
import { runEvents, type RunSnapshot } from './events.js';
import type { ControllerMetrics } from './metrics.js';
import type { Notifier } from './notify.js';
import type { StatusBoard } from './status-board.js';
import { withRecentRun, type ControllerStatus, type LastRun, type ResourceStatus, type RunResult } from './status.js';
import type { RunOutcome } from './summarise.js';

/**
 * The end of a run, in one place: finishRun() derives from the run's outcome the run record
 * of /status (last_run, recent_runs, runs: the conditions Ready, Reconciling and Stalled follow
 * from them, health.ts), the run metrics and the log line; RunReporter applies it.
 */

/** What a run's end is compared with: the status as the run found it. */
export interface RunStart {
  trigger: string;
  startedAt: number;
  /** For the events of the run (what changed). */
  before: RunSnapshot;
}

export function startRun(status: ControllerStatus, trigger: string, now = Date.now()): RunStart {
  return {
    trigger,
    startedAt: now,
    before: { revision: status.last_run?.revision ?? null, converged: status.revision.converged?.id ?? null, resources: status.resources },
  };
}

export interface FinishedRun {
  /** What the run changes on /status. */
  status: { last_run: LastRun; recent_runs: ControllerStatus['recent_runs']; runs: number };
  /** The run metrics: runs by result, and the duration. */
  metrics: { result: RunResult; seconds: number };
  log: { level: 'info' | 'debug'; fields: Record<string, unknown>; message: string; warnings?: string[] };
  /** What the run came to, to compare the next one with (see `previous`). */
  outcomeKey: string;
}

export interface FinishInput {
  start: RunStart;
  outcome: RunOutcome;
  /** The revision in force (the one the run reconciled), if any. */
  revision: string | null;
  /** The status as the run's steps left it. */
  status: ControllerStatus;
  finishedAt: number;
  /** The outcome key of the run before. */
  previous: string | undefined;
}

/**
 * The run record, metrics and log line of a run. The log line is info when the run did
 * something or came to something new: the first run, one someone asked for (webhook, resume),
 * a change applied or failed, another revision, result, error, warning or plan; its warnings
 * then follow at warn. The same outcome again every interval is debug, so a converged controller
 * is quiet (/status and the metrics show each run).
 */
export function finishRun({ start, outcome, revision, status, finishedAt, previous }: FinishInput): FinishedRun {
  const { trigger, startedAt } = start;
  const duration = finishedAt - startedAt;
  const warnings = outcome.warnings ?? [];
  const lastRun: LastRun = {
    trigger,
    started_at: new Date(startedAt).toISOString(),
    finished_at: new Date(finishedAt).toISOString(),
    duration_ms: duration,
    result: outcome.result,
    revision,
    summary: outcome.summary,
    errors: outcome.errors,
    ...(outcome.errorCodes && Object.keys(outcome.errorCodes).length ? { error_codes: outcome.errorCodes } : {}),
    warnings,
  };
  const outcomeKey = JSON.stringify([revision, outcome.result, outcome.errors, outcome.summary, warnings]);
  const notable = trigger !== 'interval' || acted(start.before.resources, status.resources) || outcomeKey !== previous;
  return {
    status: { last_run: lastRun, recent_runs: withRecentRun(status.recent_runs, lastRun), runs: status.runs + 1 },
    metrics: { result: outcome.result, seconds: duration / 1000 },
    log: {
      level: notable ? 'info' : 'debug',
      fields: { trigger, revision, result: outcome.result, duration_ms: duration, summary: outcome.summary },
      message: 'reconcile run',
      // The plan's warnings at warn, when the run is news (the same ones every interval are not).
      ...(notable && warnings.length ? { warnings } : {}),
    },
    outcomeKey,
  };
}

/** The run wrote resource rows, and a change in them was applied or failed. */
const acted = (before: ResourceStatus[], after: ResourceStatus[]) =>
  after !== before && after.some((r) => r.state === 'applied' || r.state === 'failed');

export interface RunReporterDeps {
  board: StatusBoard;
  metrics: ControllerMetrics;
  notifier?: Notifier;
  log: Logger;
}

/** Records finished runs: status, events, listeners, metrics, log line. */
export class RunReporter {
  private lastOutcome: string | undefined;

  constructor(private readonly d: RunReporterDeps) {}

  report(start: RunStart, outcome: RunOutcome, revision: string | null, finishedAt = Date.now()): void {
    const { board, metrics, notifier, log } = this.d;
    const run = finishRun({ start, outcome, revision, status: board.current, finishedAt, previous: this.lastOutcome });
    this.lastOutcome = run.outcomeKey;
    board.record(run.status);
    for (const event of notifier ? runEvents(start.before, board.snapshot()) : []) notifier!.notify(event);
    board.changed();
    metrics.reconcileDuration.observe({ result: run.metrics.result }, run.metrics.seconds);
    metrics.runs.inc({ result: run.metrics.result });
    metrics.recordStatus(board.snapshot());
    log[run.log.level](run.log.fields, run.log.message);
    if (run.log.warnings) log.warn({ revision, warnings: run.log.warnings }, 'plan warnings');
  }
}
