import {
  countByCode,
  EngineConfigError,
  summaryJson,
  formatProblems,
  type HealthEntry,
  type Outcome,
  type Plan,
  type PlannedChange,
  type Problem,
} from '../engine/index.js';
import type { BackoffEntry } from './backoff.js';
import { resultWithHealth, withHealth } from './health.js';
import type { ControllerStatus, ResourceStatus, RunResult } from './status.js';

/**
 * The summarise step of a run, as pure functions: the resource rows of /status from the plan
 * and what the apply did, and what the run came to (result, errors, plan summary).
 */

/** What a run came to: the result, its errors (one line each) and the plan's counts. */
export interface RunOutcome {
  result: RunResult;
  /** As shown on /status and in logs (formatProblem); a health or apply failure has no code. */
  errors: string[];
  /** The plan's or configuration's problems counted by code (docs/guides/errors.md). */
  errorCodes?: Record<string, number>;
  /**
   * The plan's warnings (a project kept from prune because it holds what this source does not
   * manage, an undeclared referrer of a replaced resource...): the run still did its work.
   */
  warnings?: string[];
  summary: Record<string, number>;
}

/** An outcome's errors from problems: formatted for people, counted by code for tools. */
const problemsOf = (problems: readonly Problem[]) => ({ errors: formatProblems(problems), errorCodes: countByCode(problems) });

/** What an apply step leaves for the summary: each applied change's outcome, and the changes held back (and why). */
export interface ChangeOutcomes {
  outcomes: Map<PlannedChange, Outcome>;
  deferred: Map<PlannedChange, string>;
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The results of a run that made the platform match (apply mode) or found it matching (drift mode). */
export const isConverged = (result: RunResult) => result === 'converged' || result === 'in-sync';

export const summaryOf = (plan: Plan): Record<string, number> => summaryJson(plan);

/** A change's row. Rows are made whole here and changed in place after (withHealth, withRetry): see withHealth for why. */
export const rowOf = (c: PlannedChange, state: ResourceStatus['state'], detail: string | null, id = c.id ?? null): ResourceStatus => ({
  kind: c.kind,
  yaml_kind: c.yamlKind,
  project: c.project ?? null,
  name: c.name,
  id,
  action: c.action,
  state,
  detail,
});

/** When the resource backs off: how many failures, and when it is tried again. */
function withRetry(row: ResourceStatus, e: BackoffEntry | undefined): ResourceStatus {
  if (!e) return row;
  row.failures = e.failures;
  row.next_attempt_at = iso(e.nextAttemptAt);
  return row;
}

/** Why a change is planned: what the server lacks, the fields that differ, the reasons. */
export const changeDetail = (c: PlannedChange) =>
  c.action === 'create'
    ? 'not on the server'
    : c.action === 'delete'
      ? c.reasons.join('; ')
      : [c.changes.map((f) => f.field).join(', '), ...c.reasons].filter(Boolean).join('; ');

/** Why a change waits: its resource backs off after failing. */
export const backoffReason = (e: BackoffEntry | undefined) =>
  e ? `backing off after ${e.failures} failure${e.failures === 1 ? '' : 's'}: ${e.lastError}` : undefined;

/** Drift mode's rows: what differs is drifted, the rest in sync; with health as the plan observed it (nothing is applied nor waited for). */
export const driftRows = (plan: Plan): ResourceStatus[] =>
  plan.changes.map((c) => withHealth(c.action === 'no-op' ? rowOf(c, 'in-sync', null) : rowOf(c, 'drifted', changeDetail(c)), c.health));

/** The rows of a plan with errors: nothing was applied. */
export const heldRows = (plan: Plan): ResourceStatus[] =>
  plan.changes.map((c) => (c.action === 'no-op' ? rowOf(c, 'in-sync', null) : rowOf(c, 'pending', `not applied: the plan has errors`)));

/**
 * Apply mode's rows: what each change came to, and its resource's health after the apply
 * (`health`, the settle step's). `backoffOf` gives a resource's backoff entry, as the run left it
 * (a failed change has one).
 */
export function resourceRows(
  plan: Plan,
  applied: ChangeOutcomes,
  backoffOf: (key: string) => BackoffEntry | undefined,
  health: HealthEntry[] = [],
): ResourceStatus[] {
  const healthByKey = new Map(health.map((h) => [h.key, h]));
  return plan.changes.map((c) => withHealth(outcomeRow(c, applied, backoffOf), healthByKey.get(c.key)));
}

/** What one change came to. */
function outcomeRow(c: PlannedChange, applied: ChangeOutcomes, backoffOf: (key: string) => BackoffEntry | undefined): ResourceStatus {
  if (c.action === 'no-op') return rowOf(c, 'in-sync', null);
  const held = applied.deferred.get(c);
  if (held !== undefined) return withRetry(rowOf(c, 'backoff', held), backoffOf(c.key));
  // dpctl.dev/reconcile: observe: reported as drift, never applied.
  if (c.observeOnly) return rowOf(c, 'drifted', `observe only: ${changeDetail(c)}`);
  const o = applied.outcomes.get(c);
  if (!o) return rowOf(c, 'pending', null);
  switch (o.status) {
    case 'done':
      return rowOf(c, 'applied', `${c.action} done`, o.id ?? c.id ?? null);
    case 'failed':
      return withRetry(rowOf(c, 'failed', o.message ?? null), backoffOf(c.key));
    case 'skipped':
      return rowOf(c, 'skipped', o.message ?? null);
    default:
      return rowOf(c, 'unsupported', o.message ?? null);
  }
}

/** Drift mode: plan errors, else drift, else in sync (each subject to health). */
export function driftOutcome(plan: Plan, driftCount: number, rows: ResourceStatus[]): RunOutcome {
  return {
    result: resultWithHealth(plan.errors.length ? 'plan-error' : driftCount ? 'drift' : 'in-sync', rows),
    ...problemsOf(plan.errors),
    warnings: plan.warnings,
    summary: summaryOf(plan),
  };
}

export const planErrorOutcome = (plan: Plan): RunOutcome => ({
  result: 'plan-error',
  ...problemsOf(plan.errors),
  warnings: plan.warnings,
  summary: summaryOf(plan),
});

/** Apply mode: stopped, incomplete while a change failed or waits, else converged (subject to health); each row in trouble an error. */
export function applyOutcome(rows: ResourceStatus[], aborted: boolean, plan: Plan): RunOutcome {
  const failed = rows.filter((r) => r.state === 'failed' || r.state === 'backoff' || r.state === 'skipped' || r.state === 'unsupported');
  const result: RunResult = aborted ? 'stopped' : failed.length ? 'incomplete' : resultWithHealth('converged', rows);
  const unwell = rows.filter((r) => r.state === 'degraded' || r.state === 'progressing');
  return {
    result,
    errors: [...failed, ...unwell].map((r) => `${r.yaml_kind} ${r.project ? `${r.project}/` : ''}${r.name}: ${r.state}: ${r.detail ?? ''}`),
    warnings: plan.warnings,
    summary: summaryOf(plan),
  };
}

/** No revision is in force yet: the newest is invalid, or none could be fetched. */
export function noRevisionOutcome(revision: ControllerStatus['revision']): RunOutcome {
  return {
    result: revision.invalid ? 'invalid' : 'error',
    errors: revision.invalid?.errors ?? [revision.fetch_error ?? 'no revision yet'],
    summary: {},
  };
}

/** Results an invalid newest revision does not replace: the run itself failed, or was stopped. */
const KEEPS_OWN_RESULT = new Set<RunResult>(['error', 'stopped']);

/**
 * The newest revision is invalid: the run applied the last good one, and says so. It is the root
 * cause to show (the Ready reason, the ApplyFailed event), also when the last good revision's
 * resources are degraded or failing: a broken commit was masked as `degraded` by any connector in error.
 */
export function withInvalidRevision(outcome: RunOutcome, invalid: ControllerStatus['revision']['invalid']): RunOutcome {
  if (!invalid) return outcome;
  return {
    ...outcome,
    result: KEEPS_OWN_RESULT.has(outcome.result) ? outcome.result : 'invalid',
    errors: [...invalid.errors, ...outcome.errors],
  };
}

/** A run that failed with an error (a config error lists its errors); `stopped` when it was aborted. */
export function errorOutcome(err: unknown, aborted: boolean): RunOutcome {
  const result = aborted ? 'stopped' : 'error';
  if (err instanceof EngineConfigError) return { result, ...problemsOf(err.errors), summary: {} };
  return { result, errors: [(err as Error).message], summary: {} };
}
