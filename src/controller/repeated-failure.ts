/** How often a failure that goes on unchanged is logged again; /status and the metrics show every one meanwhile. */
export const REPEAT_LOG_MS = 10 * 60_000;

/**
 * Decides when a failure that recurs on every interval (a source that stays unreachable) is
 * logged: when it starts, when its message changes, then at most every REPEAT_LOG_MS with how
 * many failed since the last line; its end once. One line per interval buried the first one.
 */
export class RepeatedFailure {
  private current?: { error: string; since: number; loggedAt: number; unlogged: number; failures: number };

  constructor(
    private readonly now: () => number,
    private readonly everyMs = REPEAT_LOG_MS,
  ) {}

  /** Records a failure: whether to log it now, and how many went unlogged before it (0 for a new one). */
  failed(error: string): { log: boolean; unlogged: number; since: number } {
    const now = this.now();
    const c = this.current;
    if (!c || c.error !== error) {
      this.current = { error, since: c?.since ?? now, loggedAt: now, unlogged: 0, failures: (c?.failures ?? 0) + 1 };
      return { log: true, unlogged: 0, since: this.current.since };
    }
    c.failures++;
    if (now - c.loggedAt < this.everyMs) {
      c.unlogged++;
      return { log: false, unlogged: c.unlogged, since: c.since };
    }
    const unlogged = c.unlogged;
    Object.assign(c, { loggedAt: now, unlogged: 0 });
    return { log: true, unlogged, since: c.since };
  }

  /** Records a success: when the failures it ends began and how many there were, or undefined when none was going on. */
  succeeded(): { since: number; failures: number } | undefined {
    const c = this.current;
    this.current = undefined;
    return c && { since: c.since, failures: c.failures };
  }
}
