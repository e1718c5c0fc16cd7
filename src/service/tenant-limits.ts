/**
 * Per-tenant bounds on request work that holds something every tenant shares: a connection of
 * the store's pool (write transactions), or the event loop for long (pages of large resources).
 * The rate limit bounds how many requests a tenant sends a minute, not how many it has open at
 * once; these bound the second. Each process keeps its own (TenantGate, runtime/tenant-gate.ts):
 * FIFO, the waiting requests hold no connection.
 */
import type { ServiceContext } from './context.js';
import { TenantGate } from './runtime/tenant-gate.js';

/**
 * Write transactions of the API's generic routes (create, PATCH, delete) one tenant has open at
 * once, per process. A write takes its pool connection and then waits for its project's row lock
 * (writes.ts, lockRow): 50 concurrent PATCHes of one connector held 9 of PostgreSQL's 10 pool
 * connections waiting on that lock, and another tenant's GETs waited for a connection (p50 2 ms to
 * about 1 s). Writes of one project run one at a time under its lock anyway, so two open is
 * enough to keep them going; the rest wait here, before the transaction, with no connection.
 */
export const WRITE_TX_PER_TENANT = 2;
/**
 * Writes of one tenant that wait for a turn; past them a write is 429 with Retry-After: 1. Each
 * holds its parsed body (up to the body limit) while it waits, as it held it waiting for a pool
 * connection before: this bounds that too.
 */
export const WRITES_WAITING_PER_TENANT = 1_000;

/**
 * List pages of a scope that holds large resources (store/large-scopes.ts) one tenant reads at
 * once, per process. Such a page is up to PAGE_BYTES (8 MiB) read, joined and encoded: 10
 * concurrent ones over 1 MB connectors held another tenant's answers up to 1.9 s. Other pages
 * (at most 100 items of 64 KiB) do not pass through the gate.
 */
export const LARGE_PAGES_PER_TENANT = 1;
/** Large pages of one tenant that wait for a turn; past them a list is 429 with Retry-After: 1. */
export const LARGE_PAGES_WAITING_PER_TENANT = 64;

interface Limits {
  writes: TenantGate;
  largePages: TenantGate;
}

/** One set per service (tests start several in one process). */
const perService = new WeakMap<ServiceContext, Limits>();

export function tenantLimits(ctx: ServiceContext): Limits {
  let limits = perService.get(ctx);
  if (!limits)
    perService.set(
      ctx,
      (limits = {
        writes: new TenantGate('writes', WRITE_TX_PER_TENANT, WRITES_WAITING_PER_TENANT),
        largePages: new TenantGate('list pages of large resources', LARGE_PAGES_PER_TENANT, LARGE_PAGES_WAITING_PER_TENANT),
      }),
    );
  return limits;
}

/**
 * Runs `read` (a page of a scope that holds large resources) in the tenant's turn. It starts after
 * an I/O phase of the event loop: a page handed the turn by the one before would otherwise start in
 * that page's turn, before any other request is read (on SQLite, where the read itself holds the
 * loop, two or more pages back to back).
 */
export function largePage<T>(ctx: ServiceContext, tenantId: string, read: () => Promise<T>): Promise<T> {
  return tenantLimits(ctx).largePages.run(tenantId, async () => {
    await afterPoll();
    return read();
  });
}

/** Two setImmediate turns: the first may come before the loop's next I/O poll, the second always comes after it. */
const afterPoll = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)));
