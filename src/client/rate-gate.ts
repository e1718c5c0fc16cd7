/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(
      () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      },
      Math.max(0, ms),
    );
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * The service's quota is per tenant and per endpoint (method + route), shared by every caller
 * of the tenant. When one request gets a 429, every request of this client to that endpoint
 * waits out the Retry-After instead of spending the server's patience on more 429s; other
 * endpoints are untouched. Keys are `<origin> <METHOD> <route pattern>`.
 */
export class EndpointGate {
  private readonly until = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Pauses `key` for `ms` from now (a later pause never shortens an earlier one). Returns the end. */
  pause(key: string, ms: number): number {
    const end = this.now() + ms;
    const current = this.until.get(key) ?? 0;
    if (end > current) this.until.set(key, end);
    return Math.max(end, current);
  }

  /** When `key` may be called again (epoch ms), or undefined when it is not paused. */
  pausedUntil(key: string): number | undefined {
    const end = this.until.get(key);
    if (end === undefined) return undefined;
    if (end <= this.now()) {
      this.until.delete(key);
      return undefined;
    }
    return end;
  }

  /**
   * Waits until `key` is open. `deadline` (epoch ms): when the pause lasts beyond it,
   * `tooLong(end)` is thrown instead of waiting. Returns the time waited.
   */
  async wait(key: string, deadline: number, signal: AbortSignal | undefined, tooLong: (end: number) => Error): Promise<number> {
    const started = this.now();
    let slept = false;
    for (;;) {
      const end = this.pausedUntil(key);
      // Without a sleep nothing was waited, even when the clock ticked between two reads
      // (on a loaded machine it does, and a phantom 1 ms wait would be reported).
      if (end === undefined) return slept ? this.now() - started : 0;
      if (end > deadline) throw tooLong(end);
      await sleep(end - this.now(), signal);
      slept = true;
    }
  }
}

/** Retry-After in seconds or as an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined || v.trim() === '') return undefined;
  if (/^\s*\d+(\.\d+)?\s*$/.test(v)) return Math.round(Number(v) * 1000);
  const date = Date.parse(v);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}
