import type { Db } from './store/db.js';
import { ApiError } from './errors.js';

const WINDOW_SECONDS = 60;
/** A replica reserves at most this share of a quota at once: the bound on what it can hold back from the others. */
const MAX_BATCH_SHARE = 1 / 32;

/** What one replica holds of one quota in the current window. */
interface Allowance {
  /** Permits reserved in the shared store and not yet spent here. */
  left: number;
  /** Size of the next reservation: 1 at first, doubling while the endpoint is busy. */
  nextBatch: number;
  /** The shared quota is fully reserved: refuse without asking the store again. */
  exhausted: boolean;
  /** Permits reserved in the shared store this window, by every replica, as of this replica's last reservation. */
  reserved: number;
  /** A reservation in flight, which concurrent requests wait for instead of sending their own. */
  reserving?: Promise<void>;
}

/**
 * One quota per tenant and endpoint, shared by every user and key of the tenant, in fixed
 * one-minute windows, across every replica on one database, without a database write per
 * request.
 *
 * The shared row counts permits reserved, not requests. A replica reserves a batch with one
 * write (UPDATE ... RETURNING the new total, so the batch is never more than what is left) and
 * spends it in memory. Batches start at 1 and double while the endpoint is busy, up to 1/32 of
 * the quota, so a quiet tenant costs one write per request as before and a busy one about 32
 * plus log2(quota) writes per minute whatever its rate. Once the quota is fully reserved the
 * replica refuses without asking again until the window ends.
 *
 * Bounds, documented in docs/security.md: all replicas together never admit more than the
 * quota (no overshoot). What another replica reserved and has not spent is unavailable here until
 * the window ends: at most 1/32 of the quota per other replica, so with R replicas a tenant may
 * be refused up to (R-1)/32 of its quota early. A single replica admits exactly the quota.
 */
/** What is left of a quota after a request was admitted (RateLimit-* headers; request-pipeline.ts). */
export interface QuotaLeft {
  limit: number;
  /**
   * Requests still admitted in this window: what no replica has reserved yet (as of this
   * replica's last reservation) plus what this replica holds. With several replicas, what the
   * others spent since is not seen: a hint, never more than the truth by more than that.
   */
  remaining: number;
  /** Seconds until the window ends. */
  resetSeconds: number;
}

export class RateLimiter {
  private lastSweep = 0;
  private windowStart = -1;
  private allowances = new Map<string, Allowance>();
  private readonly maxBatch: number;

  constructor(
    private readonly db: Db,
    private readonly perMinute: number,
    private readonly clock: () => number,
    /** Says whose quota it is in the 429 message (the per-address budget of anonymous endpoints uses this class too). */
    private readonly whose = '',
  ) {
    this.maxBatch = Math.max(1, Math.floor(perMinute * MAX_BATCH_SHARE));
  }

  async hit(tenantId: string, endpoint: string): Promise<QuotaLeft> {
    const nowSeconds = Math.floor(this.clock() / 1000);
    const windowStart = nowSeconds - (nowSeconds % WINDOW_SECONDS);
    if (windowStart !== this.windowStart) this.startWindow(windowStart);
    const key = `${tenantId}\0${endpoint}`;
    let allowance = this.allowances.get(key);
    if (!allowance) this.allowances.set(key, (allowance = { left: 0, nextBatch: 1, exhausted: false, reserved: 0 }));
    while (allowance.left === 0 && !allowance.exhausted) {
      allowance.reserving ??= this.reserve(allowance, tenantId, endpoint, windowStart).finally(() => (allowance.reserving = undefined));
      await allowance.reserving;
      // A new window began while this request waited: it counts in the new one.
      if (this.windowStart !== windowStart) return this.hit(tenantId, endpoint);
    }
    const resetSeconds = Math.max(1, windowStart + WINDOW_SECONDS - nowSeconds);
    if (allowance.left > 0) {
      allowance.left--;
      return { limit: this.perMinute, remaining: Math.max(0, this.perMinute - allowance.reserved) + allowance.left, resetSeconds };
    }
    throw new ApiError(
      'rate_limited',
      `Rate limit of ${this.perMinute} requests per minute exceeded for ${endpoint}${this.whose}; retry in ${resetSeconds} s`,
      undefined,
      429,
      {
        'Retry-After': String(resetSeconds),
        // As on every admitted answer (request-pipeline.ts), so a client reads one set of headers.
        'RateLimit-Limit': String(this.perMinute),
        'RateLimit-Remaining': '0',
        'RateLimit-Reset': String(resetSeconds),
      },
    );
  }

  /** Takes up to `nextBatch` permits from the shared count (what is left of the quota if less). */
  private async reserve(allowance: Allowance, tenantId: string, endpoint: string, windowStart: number): Promise<void> {
    const batch = allowance.nextBatch;
    const row = await this.db.write<{ count: number }>(
      `INSERT INTO rate_counters (tenant_id, endpoint, window_start, count) VALUES (?, ?, ?, ?)
       ON CONFLICT (tenant_id, endpoint, window_start) DO UPDATE SET count = rate_counters.count + ? RETURNING count`,
      [tenantId, endpoint, windowStart, batch, batch],
    );
    allowance.reserved = Number(row?.count ?? 0);
    const reservedBefore = allowance.reserved - batch;
    const granted = Math.max(0, Math.min(batch, this.perMinute - reservedBefore));
    allowance.left += granted;
    allowance.nextBatch = Math.min(batch * 2, this.maxBatch);
    if (granted < batch) allowance.exhausted = true;
    this.sweep(windowStart);
  }

  /** Allowances belong to one window: a new one starts empty (what was reserved and unspent lapses with its row). */
  private startWindow(windowStart: number) {
    this.windowStart = windowStart;
    this.allowances = new Map();
  }

  /** Old windows are dropped now and then so the table stays small. */
  private sweep(windowStart: number) {
    if (windowStart - this.lastSweep < WINDOW_SECONDS * 5) return;
    this.lastSweep = windowStart;
    this.db.run('DELETE FROM rate_counters WHERE window_start < ?', [windowStart - WINDOW_SECONDS]).catch(() => undefined);
  }
}
