import type { HealthEntry, PlannedChange, SettleResult } from '../engine/index.js';
import { Backoff, type BackoffOptions } from './backoff.js';

/**
 * What the controller has learnt from connection tests (`--test-connections`), for the life of
 * the process. A connector nothing has shown to work (never run, so its credentials are untried)
 * is healthy by its state; the test is what finds the wrong password. The CLI tests such a
 * connector on every apply; the controller runs every 30 s, and a connection test reaches the
 * source database, so it tests each unproven connector once, and one whose test failed again
 * after an exponential back-off. Between tests, a failed one stays degraded with the reason.
 * A connector the run wrote is always tested (settle does it); a restart tests the unproven once more.
 */
export class ConnectionTests {
  private readonly passed = new Set<string>();
  private readonly failed: Backoff;

  constructor(backoff: BackoffOptions = {}, now: () => number = Date.now) {
    this.failed = new Backoff(backoff, now);
  }

  /** For settle's `testUnproven`: not yet passed here, and not waiting out the back-off of a failure. */
  readonly shouldTest = (c: PlannedChange): boolean => !this.passed.has(c.key) && !this.failed.waiting(c.key);

  /** Remembers a run's tests; forgets what left the plan. */
  record(settled: SettleResult, keys: Set<string>): void {
    for (const t of settled.tests) {
      if (t.success) {
        this.passed.add(t.key);
        this.failed.succeeded(t.key);
      } else {
        this.passed.delete(t.key);
        this.failed.failed(t.key, t.message);
      }
    }
    for (const k of this.passed) if (!keys.has(k)) this.passed.delete(k);
    this.failed.retain(keys);
  }

  /**
   * A health entry as the tests know it: a connector whose last test failed is degraded (while
   * nothing else has shown it works: once it has run with its current settings, its own state says
   * how it is), and one whose test passed has shown that it works.
   */
  healthOf(h: HealthEntry): HealthEntry {
    if (h.health !== 'healthy' || !(h.neverRun || h.changedSinceRun)) return h;
    const failure = this.failed.get(h.key);
    if (failure) return { ...shownToRun(h), health: 'degraded', reason: `connection test failed: ${failure.lastError}` };
    return this.passed.has(h.key) ? shownToRun(h) : h;
  }
}

const shownToRun = ({ neverRun: _, changedSinceRun: __, ...h }: HealthEntry): HealthEntry => h;
