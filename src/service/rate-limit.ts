import type { Db } from './store/db.js';
import { ApiError } from './errors.js';

const WINDOW_SECONDS = 60;

/**
 * One quota per tenant and endpoint, shared by every user and key of the tenant, in
 * fixed one-minute windows. Counters live in the database so replicas on one
 * PostgreSQL share them.
 */
export class RateLimiter {
  private lastSweep = 0;
  constructor(
    private readonly db: Db,
    private readonly perMinute: number,
    private readonly clock: () => number,
    /** Says whose quota it is in the 429 message (the per-address budget of anonymous endpoints uses this class too). */
    private readonly whose = '',
  ) {}

  async hit(tenantId: string, endpoint: string): Promise<void> {
    const nowSeconds = Math.floor(this.clock() / 1000);
    const windowStart = nowSeconds - (nowSeconds % WINDOW_SECONDS);
    const row = await this.db.write<{ count: number }>(
      `INSERT INTO rate_counters (tenant_id, endpoint, window_start, count) VALUES (?, ?, ?, 1)
       ON CONFLICT (tenant_id, endpoint, window_start) DO UPDATE SET count = rate_counters.count + 1 RETURNING count`,
      [tenantId, endpoint, windowStart],
    );
    this.sweep(windowStart);
    if (Number(row?.count ?? 0) > this.perMinute) {
      const retryAfter = Math.max(1, windowStart + WINDOW_SECONDS - nowSeconds);
      throw new ApiError('rate_limited', `Rate limit of ${this.perMinute} requests per minute exceeded for ${endpoint}${this.whose}; retry in ${retryAfter} s`, undefined, 429, {
        'Retry-After': String(retryAfter),
      });
    }
  }

  /** Old windows are dropped now and then so the table stays small. */
  private sweep(windowStart: number) {
    if (windowStart - this.lastSweep < WINDOW_SECONDS * 5) return;
    this.lastSweep = windowStart;
    this.db.run('DELETE FROM rate_counters WHERE window_start < ?', [windowStart - WINDOW_SECONDS]).catch(() => undefined);
  }
}
