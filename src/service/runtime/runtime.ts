import { EventEmitter, setMaxListeners } from 'node:events';
import { randomBytes } from 'node:crypto';
import type { ServiceContext } from '../context.js';
import { nowIso } from '../ids.js';
import type { RunData } from './runs.js';
import { TenantGate } from './tenant-gate.js';
import { RunSlots, type RunSlot } from './run-slots.js';
import { NotificationRows } from './notification-rows.js';
import type { RuntimeLogger } from './background-log.js';
import type { RevokedCredentials } from '../auth/actor.js';

/**
 * Says that a committed write revoked or changed credentials (`credentials_revoked` on the runtime's
 * events): the streams close the connections that no longer authenticate, on every replica, at once
 * rather than at their next heartbeat.
 */
export function credentialsRevoked(ctx: ServiceContext, tenantId: string, revoked: RevokedCredentials): void {
  runtimeOf(ctx).events.emit('credentials_revoked', tenantId, revoked);
}

/** Thrown inside an execution when the service stops: the run is left as a dead process would leave it. */
export class Stopped extends Error {
  constructor() {
    super('runtime stopped');
  }
}

/** Keys of the `meta` table the runtime uses: live instances and the runs they execute. */
export const META = {
  instance: (id: string) => `runtime.instance.${id}`,
  instancePrefix: 'runtime.instance.',
  run: (id: string) => `runtime.run.${id}`,
  runPrefix: 'runtime.run.',
};

/** How often a live instance says so, and after how long without a word its runs count as abandoned. */
export const HEARTBEAT_MS = 5_000;
export const STALE_MS = 30_000;

/**
 * Marks the runs of instances no longer alive failed (recovery.ts). `everyOtherInstanceIsDead`: at
 * start on a store with one owner, every other instance's runs are abandoned, not only silent ones'.
 */
export type Recovery = (rt: Runtime, everyOtherInstanceIsDead: boolean) => Promise<void>;

interface Execution {
  controller: AbortController;
  done: Promise<RunData | undefined>;
}

/**
 * The runtime of one service process: it executes runs in the background, says it is alive
 * (a heartbeat row in `meta`), and on start marks the runs that a stopped or crashed process
 * left running as failed (the recovery given to start(), recovery.ts). Run records are the truth; the in-memory
 * executions are only how this process drives its own runs forward.
 */
export class Runtime {
  readonly instanceId = `rti_${randomBytes(9).toString('base64url')}`;
  /** `run_update` (tenantId, run) on every write of a run; `step_update` (tenantId, pipelineId, message) per step change. */
  readonly events = new EventEmitter();
  private readonly executions = new Map<string, Execution>();
  private timer?: NodeJS.Timeout;
  private tick?: Promise<void>;
  private stopping = false;
  /** The service's logger (set when the routes are registered), with a database outage said once (BackgroundLog). */
  log?: RuntimeLogger & { answered?(): void };
  /** Request work that runs long in slices (a schema's classification, an infrastructure plan): one per tenant at once. */
  readonly heavyReads = new TenantGate('schema reads and infrastructure plans');
  /**
   * Outbound notifications (webhook, Slack, SMTP) in flight: 8 per tenant, 1,000 more waiting. Each may
   * take 16 s against a slow receiver (3 attempts of 5 s), and alerts x 50 channels each had their
   * own socket at once, so one tenant's slow receiver could hold the service's file descriptors.
   */
  readonly deliveries = new TenantGate('notification deliveries', 8, 1_000);
  /** Channel reads, delivery records and outbox mails of notifications, a group at a time. */
  readonly notificationRows: NotificationRows;
  /** Top-level runs executing per tenant (`--max-runs-per-tenant`, run-slots.ts). */
  readonly runSlots: RunSlots;
  /** Given to start(): marks abandoned runs failed (at start, then on every heartbeat). */
  private recovery?: Recovery;

  constructor(readonly ctx: ServiceContext) {
    this.events.setMaxListeners(0);
    this.runSlots = new RunSlots(ctx.options.maxRunsPerTenant);
    this.notificationRows = new NotificationRows(ctx);
  }

  get stopped(): boolean {
    return this.stopping;
  }

  nowMs(): number {
    return this.ctx.options.clock();
  }

  now(): string {
    return nowIso(this.ctx.options.clock);
  }

  /**
   * Waits for simulated work of `seconds` (its duration at time scale 1), scaled by the
   * service's timeScale. Rejects with Stopped when the runtime stops.
   */
  simulate(seconds: number, signal: AbortSignal): Promise<void> {
    const ms = Math.max(0, (seconds * 1000) / this.ctx.options.timeScale);
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(new Stopped());
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      const onAbort = () => {
        clearTimeout(timer);
        reject(new Stopped());
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * Executes a run in the background. `fn` returns the run as it ended; the promise returned
   * here resolves to that, or to undefined when the service stopped first. `slot` (the run's, from
   * runSlots) is given back when the execution ends, however it ends.
   */
  execute(runId: string, slot: RunSlot, fn: (signal: AbortSignal) => Promise<RunData>): Promise<RunData | undefined> {
    const controller = new AbortController();
    // Every change of an infrastructure apply waits on this signal at once (simulate): no bound to warn at.
    setMaxListeners(0, controller.signal);
    if (this.stopping) controller.abort();
    const done = (async () => {
      try {
        return await fn(controller.signal);
      } catch (err) {
        if (err instanceof Stopped || controller.signal.aborted) return undefined;
        this.log?.error({ err, runId }, 'run execution failed');
        throw err;
      } finally {
        this.executions.delete(runId);
        slot.release();
      }
    })();
    // Failures are logged above; nothing may become an unhandled rejection.
    done.catch(() => undefined);
    this.executions.set(runId, { controller, done });
    return done;
  }

  /** Runs executing in this process now. */
  get active(): number {
    return this.executions.size;
  }

  /** One sweep for abandoned runs, with the recovery given to start() (none before it). */
  async sweep(everyOtherInstanceIsDead: boolean): Promise<void> {
    await this.recovery?.(this, everyOtherInstanceIsDead);
  }

  /** Starts saying this instance is alive, and sweeping for runs abandoned by others with `recovery`. */
  async start(recovery: Recovery): Promise<void> {
    this.recovery = recovery;
    await this.heartbeat();
    // At start every other instance that left runs behind is presumed dead when the store has one
    // owner (SQLite); on PostgreSQL replicas may share it, so there only silent instances are.
    await this.sweep(this.ctx.db.dialect === 'sqlite');
    this.timer = setInterval(() => {
      // The heartbeat does not wait for a sweep: recovering many runs can outlast STALE_MS, and a
      // silent heartbeat meanwhile would make the other replicas fail this instance's live runs.
      void this.heartbeat().then(
        () => this.log?.answered?.(),
        (err) => this.log?.error({ err }, 'runtime heartbeat failed'),
      );
      if (this.tick) return;
      this.tick = this.sweep(false)
        .catch((err) => this.log?.error({ err }, 'runtime sweep failed'))
        .finally(() => (this.tick = undefined));
    }, HEARTBEAT_MS);
    this.timer.unref();
  }

  private async heartbeat(): Promise<void> {
    if (this.stopping) return;
    await this.ctx.db.run('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [
      META.instance(this.instanceId),
      String(this.nowMs()),
    ]);
  }

  /**
   * Stops driving runs: every execution is aborted and left where it is, exactly as a crash would
   * leave it, and this instance stops saying it is alive, so the next start (of any replica)
   * marks its runs failed with "interrupted by service restart".
   */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearInterval(this.timer);
    await this.tick;
    const pending = [...this.executions.values()];
    for (const e of pending) e.controller.abort();
    await Promise.race([Promise.allSettled(pending.map((e) => e.done)), new Promise((r) => setTimeout(r, 10_000).unref())]);
    await this.ctx.db.run('DELETE FROM meta WHERE key = ?', [META.instance(this.instanceId)]).catch(() => undefined);
  }
}

const RUNTIMES = new WeakMap<ServiceContext, Runtime>();

/** The runtime of a service (one per context); other workers (schedules, streams) reach it here. */
export function runtimeOf(ctx: ServiceContext): Runtime {
  let rt = RUNTIMES.get(ctx);
  if (!rt) RUNTIMES.set(ctx, (rt = new Runtime(ctx)));
  return rt;
}
