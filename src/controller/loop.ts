import type { Logger } from 'pino';
import { withJitter } from './duration.js';
import type { LeaderElector } from './leader/types.js';
import type { StatusHandlers } from './server.js';
import type { RunResult } from './status.js';
import type { SuspendSwitch } from './suspend-switch.js';

/**
 * The controller's loop: seeks leadership, and while it leads runs one reconcile after another,
 * sleeping an interval between them unless a trigger (webhook, resume, `dpctl controller
 * reconcile`) wakes it. What a run does is the caller's (reconcile); the loop owns when runs
 * happen, whether they may (leader, not suspended, not stopping), and the hooks of the status
 * listener that steer it.
 */

export interface LoopDeps {
  elector: LeaderElector;
  log: Logger;
  /** Time between runs (a little jitter is added). */
  intervalMs: number;
  suspension: SuspendSwitch;
  /** One run: fetch, reconcile, record. Aborted when leadership is lost or the loop stops. */
  reconcile(trigger: string, signal: AbortSignal): Promise<void>;
  /** A plan was made against the live platform at least once (a leader is ready from then on). */
  planned(): boolean;
  /** The last run's result: while resources are progressing the loop looks again sooner. */
  lastResult(): RunResult | undefined;
  /** The live state changed (leadership, suspension): publish the status; `suspended` when a suspend or resume did it. */
  publish(suspended?: boolean): void;
}

/** While resources are still getting there (provisioning), the next run comes at most this long after the last. */
const PROGRESSING_INTERVAL_MS = 5_000;

export class ControllerLoop {
  private leading = false;
  private busy = false;
  private pendingTrigger: string | undefined;
  private wake: (() => void) | undefined;
  private runAbort: AbortController | undefined;
  private readonly stopping = new AbortController();
  private done: Promise<void> | undefined;

  constructor(private readonly d: LoopDeps) {}

  /** This replica leads (and so reconciles). */
  get leader(): boolean {
    return this.leading;
  }

  /** A run is under way. */
  get running(): boolean {
    return this.busy;
  }

  /** A leader is ready once it planned; a standby as long as it is not stopping. */
  ready(): boolean {
    return this.leading ? this.d.planned() : !this.stopping.signal.aborted;
  }

  /** Fetch and reconcile now (as a webhook does). */
  trigger(reason = 'manual'): void {
    this.pendingTrigger = reason;
    this.wake?.();
  }

  suspend(): void {
    this.setSuspended(true);
  }

  resume(): void {
    this.setSuspended(false);
  }

  /** Takes the stored suspension (on start, and when leadership is gained). */
  async loadSuspension(when: string): Promise<void> {
    if (await this.d.suspension.load(when)) this.d.publish();
  }

  /** What the status listener steers the loop with (the status and metrics are the caller's). */
  serverHooks(): Pick<StatusHandlers, 'ready' | 'trigger' | 'suspend' | 'resume' | 'relay'> {
    return {
      ready: () => this.ready(),
      trigger: (reason) => this.trigger(reason),
      suspend: () => this.suspend(),
      resume: () => this.resume(),
      // A standby would only note a webhook for later: it passes it to the leader instead.
      relay: { isLeader: () => this.leading, leaderUrl: () => this.d.elector.leaderUrl() },
    };
  }

  start(): void {
    const { elector, log } = this.d;
    elector.onLost(() => {
      this.leading = false;
      log.error({ election: elector.description }, 'leadership lost: stopping reconciling (changes in flight finish)');
      this.runAbort?.abort();
      this.wake?.();
    });
    this.done = this.main().catch((err: Error) => log.fatal({ err: err.message }, 'controller loop crashed'));
  }

  /** Lets the run in flight finish, starts no more; resolves when the loop has ended. */
  async stop(): Promise<void> {
    this.stopping.abort();
    this.wake?.();
    await this.done;
  }

  private setSuspended(value: boolean): void {
    if (!this.d.suspension.set(value)) return;
    this.d.publish(value);
    // Resume runs at once rather than after the rest of the interval.
    if (!value) this.trigger('resume');
  }

  private async main(): Promise<void> {
    while (!this.stopping.signal.aborted) if (await this.acquire()) await this.lead();
  }

  /** Waits for leadership: false when the loop stops, or when the election failed (logged, and an interval waited). */
  private async acquire(): Promise<boolean> {
    const { elector, log } = this.d;
    try {
      await elector.acquire(this.stopping.signal);
      return true;
    } catch (err) {
      if (this.stopping.signal.aborted) return false;
      log.error({ err: (err as Error).message, election: elector.description }, 'leader election failed; retrying');
      await this.sleep(withJitter(this.d.intervalMs));
      return false;
    }
  }

  /** Runs while this replica leads and the loop is not stopping. */
  private async lead(): Promise<void> {
    const { elector, log, intervalMs } = this.d;
    // The previous leader may have suspended or resumed: its choice holds here too.
    await this.loadSuspension('leading');
    this.leading = true;
    log.info({ identity: elector.identity, election: elector.description }, 'leading: reconciling');
    this.d.publish();
    let reason = 'start';
    while (!this.stopping.signal.aborted && this.leading && elector.isLeader()) {
      const why = this.pendingTrigger ?? reason;
      this.pendingTrigger = undefined;
      await this.runOnce(why);
      if (this.stopping.signal.aborted || !elector.isLeader()) break;
      const progressing = this.d.lastResult() === 'progressing';
      if (this.pendingTrigger === undefined) await this.sleep(withJitter(progressing ? Math.min(intervalMs, PROGRESSING_INTERVAL_MS) : intervalMs));
      reason = 'interval';
    }
    this.leading = false;
    this.d.publish();
  }

  private async runOnce(trigger: string): Promise<void> {
    if (this.d.suspension.value) return;
    this.busy = true;
    try {
      this.runAbort = new AbortController();
      await this.d.reconcile(trigger, AbortSignal.any([this.runAbort.signal, this.stopping.signal]));
    } finally {
      this.busy = false;
    }
  }

  /** Waits `ms`, or less when triggered, stopped or leadership is lost. */
  private sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.stopping.signal.removeEventListener('abort', done);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wake = done;
      this.stopping.signal.addEventListener('abort', done, { once: true });
    });
  }
}
