import { ApiError } from '../errors.js';

/** A top-level run's claim on one of its tenant's slots; given back once, when the run ends or fails to start. */
export interface RunSlot {
  release(): void;
  /** For a start's `.catch`: gives the slot back and rethrows (a run that started gives it back when it ends). */
  failedToStart(err: unknown): never;
}

/** A step of a pipeline run holds no slot of its own: its pipeline run's does (its steps run 10 at a time, and 20 of the tenant's at once across its runs: tenant-work.ts). */
const STEP_OF_A_RUN: RunSlot = {
  release: () => undefined,
  failedToStart: (err) => {
    throw err;
  },
};

/** Runs take seconds to hours; a client that waits this long and retries costs little. */
const RETRY_AFTER_SECONDS = 5;

/**
 * The runs one tenant may have executing at once on this service instance (`--max-runs-per-tenant`).
 * Each executing run holds memory, its progress writes and, on a real source, an outbound
 * connection; the rate limit alone (per endpoint per minute) let one tenant start thousands that
 * then ran side by side with every other tenant's. Counted per instance, in memory: with N replicas
 * a tenant may execute up to N times the cap.
 *
 * A manual trigger past the cap is 429 `rate_limited` (Retry-After); a scheduled tick of a tenant at
 * its cap is not claimed and stays due (scheduler.ts), so when a slot frees the latest due tick runs.
 */
export class RunSlots {
  private readonly executing = new Map<string, number>();

  /** `max`: slots per tenant; 0 for no cap. */
  constructor(private readonly max: number) {}

  /** Whether a top-level run of the tenant would be refused now. */
  isFull(tenantId: string): boolean {
    return this.max > 0 && (this.executing.get(tenantId) ?? 0) >= this.max;
  }

  /** Whether a tenant is at its cap (few to look at: only tenants with runs executing are counted). */
  anyFull(): boolean {
    if (this.max === 0) return false;
    for (const n of this.executing.values()) if (n >= this.max) return true;
    return false;
  }

  /** Runs of the tenant executing now (holding a slot). */
  count(tenantId: string): number {
    return this.executing.get(tenantId) ?? 0;
  }

  /** Takes a slot for a run (none for a step of a pipeline run, `parentRunId`), or throws 429 when the tenant is at its cap. */
  take(tenantId: string, parentRunId?: string | null): RunSlot {
    if (parentRunId) return STEP_OF_A_RUN;
    if (this.isFull(tenantId))
      throw new ApiError(
        'rate_limited',
        `This tenant already has ${this.max} run${this.max === 1 ? '' : 's'} executing, the most it may have at once; retry when one has ended`,
        undefined,
        429,
        { 'Retry-After': String(RETRY_AFTER_SECONDS) },
      );
    this.executing.set(tenantId, this.count(tenantId) + 1);
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      const left = this.count(tenantId) - 1;
      if (left > 0) this.executing.set(tenantId, left);
      else this.executing.delete(tenantId);
    };
    return {
      release,
      failedToStart: (err) => {
        release();
        throw err;
      },
    };
  }
}
