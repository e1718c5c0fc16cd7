/** What `/status` reports: JSON for machines, and the same as an HTML page (status-page.ts). */

export type ResourceState =
  'in-sync' | 'applied' | 'drifted' | 'failed' | 'backoff' | 'skipped' | 'unsupported' | 'pending' | 'degraded' | 'progressing';
export const RESOURCE_STATES: ResourceState[] = [
  'in-sync',
  'applied',
  'drifted',
  'failed',
  'backoff',
  'skipped',
  'unsupported',
  'pending',
  'degraded',
  'progressing',
];

export type RunResult =
  | 'converged'
  | 'drift'
  | 'in-sync'
  | 'incomplete'
  | 'plan-error'
  | 'invalid'
  | 'error'
  | 'suspended'
  | 'stopped'
  | 'degraded'
  | 'progressing';

/** A Kubernetes-style condition (Ready, Reconciling, Stalled), as Flux reports them. */
export interface Condition {
  type: 'Ready' | 'Reconciling' | 'Stalled';
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  last_transition_time: string;
}

export interface ResourceStatus {
  kind: string;
  yaml_kind: string;
  project: string | null;
  name: string;
  id: string | null;
  /** What the last run planned: create, update, replace, delete or no-op. */
  action: string;
  state: ResourceState;
  detail: string | null;
  failures?: number;
  next_attempt_at?: string;
  /** From the kind's x-health rule, for kinds that have one. */
  health?: import('../kinds/index.js').Health;
  health_reason?: string | null;
  /**
   * Healthy by its state, but that state is its kind's first one and no connection test has
   * passed: nothing has shown yet that it works (a connector never synced, its credentials untried).
   */
  never_run?: boolean;
}

export interface RevisionInfo {
  id: string;
  summary: string | null;
  at: string;
}

export interface ControllerStatus {
  controller: {
    mode: 'apply' | 'drift';
    source: string;
    source_id: string;
    interval_ms: number;
    prune: boolean;
    test_connections: boolean;
    suspended: boolean;
    ready: boolean;
    leader: { elected: boolean; identity: string; election: string };
    started_at: string;
  };
  revision: {
    /** Newest revision fetched. */
    fetched: RevisionInfo | null;
    /** The last revision that passed validation: the one in force. */
    applied: RevisionInfo | null;
    /** The last revision a run fully applied (apply mode) or found in sync (drift mode). */
    converged: RevisionInfo | null;
    /** Set while the newest revision fails validation: not applied. */
    invalid: { id: string; summary: string | null; errors: string[] } | null;
    fetch_error: string | null;
    last_fetch_at: string | null;
  };
  last_run: LastRun | null;
  runs: number;
  /** The last runs, newest first (at most RECENT_RUNS): revision, result and duration of each. */
  recent_runs: RunRecord[];
  /** Ready, Reconciling, Stalled: derived from the rest in one place (health.ts). */
  conditions: Condition[];
  resources: ResourceStatus[];
  drift: ReturnType<typeof import('../engine/index.js').driftJson>['drift'];
}

/** What every run reports. */
interface RunBase {
  trigger: string;
  started_at: string;
  finished_at: string;
  duration_ms: number;
  result: RunResult;
  revision: string | null;
  summary: Record<string, number>;
}

/** The last run, with all its errors and warnings. */
export interface LastRun extends RunBase {
  errors: string[];
  /** The errors that are plan or configuration problems, counted by code (docs/guides/errors.md). */
  error_codes?: Record<string, number>;
  /** The plan's warnings (absent from controllers before 0.1.0's warnings). */
  warnings?: string[];
}

/** One run in `recent_runs`: `last_run` without its error and warning lists (the counts and the first error instead). */
export interface RunRecord extends RunBase {
  error_count: number;
  first_error: string | null;
  warning_count?: number;
}

/** How many runs `recent_runs` keeps. */
export const RECENT_RUNS = 20;

/** `list` with `run` in front, bounded to RECENT_RUNS (a new array: snapshots keep theirs). */
export function withRecentRun(list: readonly RunRecord[], run: NonNullable<ControllerStatus['last_run']>): RunRecord[] {
  const { errors, warnings, ...rest } = run;
  const first = errors[0];
  const record: RunRecord = {
    ...rest,
    error_count: errors.length,
    first_error: first === undefined ? null : first.slice(0, 1_000),
    ...(warnings?.length ? { warning_count: warnings.length } : {}),
  };
  return [record, ...list].slice(0, RECENT_RUNS);
}

export { renderStatusHtml } from './status-page.js';
