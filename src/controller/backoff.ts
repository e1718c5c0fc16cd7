/** Exponential backoff per resource: a failing resource is retried later, without holding up the rest. */
export interface BackoffEntry {
  failures: number;
  /** Epoch ms before which the resource is not tried again. */
  nextAttemptAt: number;
  lastError: string;
}

export interface BackoffOptions {
  /** First delay (default 5 s). */
  baseMs?: number;
  /** Cap (default 5 min). */
  maxMs?: number;
}

export class Backoff {
  private readonly entries = new Map<string, BackoffEntry>();
  private readonly baseMs: number;
  private readonly maxMs: number;

  constructor(
    options: BackoffOptions = {},
    private readonly now: () => number = Date.now,
  ) {
    this.baseMs = options.baseMs ?? 5_000;
    this.maxMs = options.maxMs ?? 300_000;
  }

  /** Records a failure: the delay doubles per consecutive failure, up to the cap. */
  failed(key: string, error: string): BackoffEntry {
    const failures = (this.entries.get(key)?.failures ?? 0) + 1;
    const delay = Math.min(this.maxMs, this.baseMs * 2 ** (failures - 1));
    const entry = { failures, nextAttemptAt: this.now() + delay, lastError: error };
    this.entries.set(key, entry);
    return entry;
  }

  succeeded(key: string): void {
    this.entries.delete(key);
  }

  /** The entry while the resource must wait, else undefined (its time has come: try it). */
  waiting(key: string): BackoffEntry | undefined {
    const e = this.entries.get(key);
    return e && e.nextAttemptAt > this.now() ? e : undefined;
  }

  get(key: string): BackoffEntry | undefined {
    return this.entries.get(key);
  }

  /** Forgets resources that left the plan (deleted from the config); `keep` spares other entries (a project's provisioning). */
  retain(keys: Set<string>, keep: (key: string) => boolean = () => false): void {
    for (const k of this.entries.keys()) if (!keys.has(k) && !keep(k)) this.entries.delete(k);
  }

  /** A new revision may fix what failed: everything is tried again at once. */
  clear(): void {
    this.entries.clear();
  }
}
