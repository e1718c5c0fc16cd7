import { Stopped, type Runtime } from './runtime.js';

/**
 * Progress writes, a run's own (RunRecorder in runs.ts) and a tenant's together (ProgressTurns): at
 * least this many times a write's own time between two, so they take at most ~10% of the event loop.
 */
export const PROGRESS_DUTY = 10;

/**
 * Steps of one tenant's pipeline runs that execute at once on this instance, across all its runs
 * (STEP_CONCURRENCY bounds them per run only). 40 runs of 500 notification steps were 400 steps in
 * flight, and their deliveries, records and stream events put another tenant's answers at p99
 * 630-720 ms for 20 s; with the budget the tenant's runs take longer and other tenants do not wait.
 */
export const TENANT_STEP_CONCURRENCY = 20;

interface Waiter {
  grant: () => void;
  refuse: () => void;
}

/**
 * A per-tenant budget of executing steps, handed out first come, first served: a run's steps wait
 * in one queue with every other run's of the tenant, and each run has at most STEP_CONCURRENCY of
 * them in it, so concurrent runs advance in turn and none waits behind the others' whole work.
 * A slot given back passes straight to the longest waiting step (no step overtakes the queue).
 */
export class StepBudget {
  private readonly tenants = new Map<string, { active: number; waiting: Waiter[] }>();

  /** `perTenant`: steps executing at once per tenant; 0 for no cap. */
  constructor(private readonly perTenant: number) {}

  /** Steps of the tenant executing now (holding a slot of the budget). */
  active(tenantId: string): number {
    return this.tenants.get(tenantId)?.active ?? 0;
  }

  /** Steps of the tenant waiting for a slot. */
  waiting(tenantId: string): number {
    return this.tenants.get(tenantId)?.waiting.length ?? 0;
  }

  /**
   * Resolves, in the order asked, once the step may execute, to the function that gives its slot
   * back (once; call it however the step ends). Rejects with Stopped if `signal` aborts first.
   */
  take(tenantId: string, signal: AbortSignal): Promise<() => void> {
    if (signal.aborted) return Promise.reject(new Stopped());
    let tenant = this.tenants.get(tenantId);
    if (!tenant) this.tenants.set(tenantId, (tenant = { active: 0, waiting: [] }));
    const t = tenant;
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      const next = t.waiting.shift();
      if (next) next.grant();
      else if (--t.active === 0) this.tenants.delete(tenantId);
    };
    if (this.perTenant === 0 || t.active < this.perTenant) {
      t.active++;
      return Promise.resolve(release);
    }
    return new Promise((resolve, reject) => {
      const onAbort = () => waiter.refuse();
      const waiter: Waiter = {
        // The slot is handed over as it is (active unchanged).
        grant: () => {
          signal.removeEventListener('abort', onAbort);
          resolve(release);
        },
        refuse: () => {
          const at = t.waiting.indexOf(waiter);
          if (at >= 0) t.waiting.splice(at, 1);
          reject(new Stopped());
        },
      };
      t.waiting.push(waiter);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/**
 * One tenant's coalesced progress writes (RunRecorder, runs.ts), one at a time in the order they
 * fell due, each followed by a pause of (duty - 1) times its own length before the tenant's next:
 * its progress writes then take at most 1/duty of the event loop however many runs it has. Each
 * run's own pacing (PROGRESS_MIN_MS, PROGRESS_DUTY) bounded one run's writes only, so 40 runs of
 * 500 steps wrote 40 runs of ~100 KB every 50 ms between them (structuredClone, JSON, the
 * statement: on SQLite all of it on the event loop).
 */
export class ProgressTurns {
  private readonly tenants = new Map<string, (() => Promise<boolean>)[]>();

  constructor(private readonly duty: number) {}

  /** Queued writes of the tenant (not yet started). */
  queued(tenantId: string): number {
    return this.tenants.get(tenantId)?.length ?? 0;
  }

  /**
   * Queues a write: `write` resolves to whether it wrote anything (a run that ended meanwhile
   * wrote its last state itself: no pause follows then), and never rejects.
   */
  enqueue(tenantId: string, write: () => Promise<boolean>): void {
    const queue = this.tenants.get(tenantId);
    if (queue) return void queue.push(write);
    this.tenants.set(tenantId, [write]);
    void this.drain(tenantId);
  }

  private async drain(tenantId: string): Promise<void> {
    const queue = this.tenants.get(tenantId)!;
    for (let write = queue.shift(); write; write = queue.shift()) {
      const started = performance.now();
      if (!(await write().catch(() => false))) continue;
      const pause = (performance.now() - started) * (this.duty - 1);
      await new Promise((resolve) => setTimeout(resolve, pause).unref());
    }
    this.tenants.delete(tenantId);
  }
}

const WORK = new WeakMap<Runtime, { steps: StepBudget; progress: ProgressTurns }>();

/** The per-tenant budgets of a runtime (one of each per process). */
function workOf(rt: Runtime) {
  let work = WORK.get(rt);
  if (!work) WORK.set(rt, (work = { steps: new StepBudget(TENANT_STEP_CONCURRENCY), progress: new ProgressTurns(PROGRESS_DUTY) }));
  return work;
}

/** The step budget of a runtime. */
export const stepBudgetOf = (rt: Runtime): StepBudget => workOf(rt).steps;

/** The progress write turns of a runtime. */
export const progressTurnsOf = (rt: Runtime): ProgressTurns => workOf(rt).progress;
