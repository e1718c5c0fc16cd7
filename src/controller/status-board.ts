import { ConditionTracker, deriveConditions } from './health.js';
import type { ControllerStatus } from './status.js';

/**
 * The controller's status, in one place: written only through record() (each step of a run
 * records its typed result, finishRun records the run), read as snapshots whose live fields
 * (suspended, ready, leader) and conditions are derived at the time they are read.
 */

/** What a step changes: whole fields, and the revision fields it knows about. */
export type StatusPatch = Partial<Pick<ControllerStatus, 'resources' | 'drift' | 'last_run' | 'recent_runs' | 'runs'>> & {
  revision?: Partial<ControllerStatus['revision']>;
};

/** The loop's live state, read at every snapshot. */
export interface LiveView {
  suspended: boolean;
  ready: boolean;
  leader: boolean;
  /** A run is under way (Reconciling). */
  running: boolean;
}

export class StatusBoard {
  private status: ControllerStatus;
  private readonly conditions = new ConditionTracker();
  private readonly listeners = new Set<() => void>();

  constructor(
    controller: ControllerStatus['controller'],
    private readonly view: () => LiveView,
  ) {
    this.status = {
      controller,
      revision: { fetched: null, applied: null, converged: null, invalid: null, fetch_error: null, last_fetch_at: null },
      last_run: null,
      runs: 0,
      recent_runs: [],
      conditions: [],
      resources: [],
      drift: [],
    };
  }

  /** The status as recorded (without the live fields and conditions): what steps compare against. */
  get current(): ControllerStatus {
    return this.status;
  }

  /** Fields a patch leaves out keep their value (and their identity: a run that never set resources did not touch them). */
  record(patch: StatusPatch): void {
    const { revision, ...rest } = patch;
    this.status = { ...this.status, ...rest, revision: revision ? { ...this.status.revision, ...revision } : this.status.revision };
  }

  /** The status with its live fields, and conditions derived from both (their transition times kept across snapshots). */
  snapshot(): ControllerStatus {
    const live = this.view();
    const s = this.status;
    const base: ControllerStatus = {
      ...s,
      controller: { ...s.controller, suspended: live.suspended, ready: live.ready, leader: { ...s.controller.leader, elected: live.leader } },
    };
    return { ...base, conditions: this.conditions.update(deriveConditions(base, live.running)) };
  }

  /** Registers a listener for status changes (a run ends, suspend, leadership): the page's live stream pushes at once. */
  subscribe(listener: () => void): void {
    this.listeners.add(listener);
  }

  /** Tells the listeners the status changed. */
  changed(): void {
    for (const listener of this.listeners) listener();
  }
}
