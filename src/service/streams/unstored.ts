/**
 * Per run: the step updates announced and not stored yet, in announce order. A new subscriber
 * takes a copy when it subscribes and sends them after the stored run it reads next: an event
 * announced before it subscribed is either still here or, its run_stored seen, in the store that
 * it reads afterwards (see RunRecorder.announce).
 */
export class UnstoredUpdates {
  private readonly runs = new Map<string, { touched: number; events: { seq: number; message: Record<string, unknown> }[] }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Runs with updates kept. */
  get size(): number {
    return this.runs.size;
  }

  /** Keeps an announced update of the run `key`. */
  remember(key: string, seq: number, message: Record<string, unknown>): void {
    let run = this.runs.get(key);
    if (!run) this.runs.set(key, (run = { touched: 0, events: [] }));
    run.touched = this.now();
    run.events.push({ seq, message });
  }

  /** The run's updates numbered up to `upTo` are stored: they are dropped. */
  forget(key: string, upTo: number): void {
    const run = this.runs.get(key);
    if (!run) return;
    let n = 0;
    while (n < run.events.length && run.events[n].seq <= upTo) n++;
    if (n === run.events.length) this.runs.delete(key);
    else run.events.splice(0, n);
  }

  /** A copy of the run's messages announced and not stored yet, in announce order. */
  announced(key: string): Record<string, unknown>[] {
    return this.runs.get(key)?.events.map((e) => e.message) ?? [];
  }

  /** Drops the runs not announced to for `ttlMs`: a run whose process died never sends its run_stored. */
  prune(ttlMs: number): void {
    const stale = this.now() - ttlMs;
    for (const [key, run] of this.runs) if (run.touched < stale) this.runs.delete(key);
  }
}
