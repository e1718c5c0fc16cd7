import { ApiError } from '../errors.js';

/**
 * At most `concurrency` tasks of one tenant at once; up to `maxWaiting` more wait their turn, and
 * past that a request is refused with 429 (Retry-After 1). For request work that runs long in
 * slices (slices.ts): slices keep each task from holding the event loop, but not a tenant from
 * starting a hundred of them, whose slices every other tenant's requests would then wait behind.
 * With the gate, one tenant's heavy reads take one turn in the rotation, however many it sends.
 */
export class TenantGate {
  private readonly tenants = new Map<string, { active: number; waiting: (() => void)[] }>();

  constructor(
    private readonly what: string,
    private readonly concurrency = 1,
    private readonly maxWaiting = 64,
  ) {}

  async run<T>(tenantId: string, task: () => Promise<T>): Promise<T> {
    let slot = this.tenants.get(tenantId);
    if (!slot) this.tenants.set(tenantId, (slot = { active: 0, waiting: [] }));
    if (slot.active < this.concurrency) slot.active++;
    else if (slot.waiting.length < this.maxWaiting) await new Promise<void>((resolve) => slot.waiting.push(resolve));
    else
      throw new ApiError(
        'rate_limited',
        `Too many ${this.what} of this tenant at once (${this.concurrency} running, ${this.maxWaiting} waiting); retry when one has ended`,
        undefined,
        429,
        { 'Retry-After': '1' },
      );
    try {
      return await task();
    } finally {
      // The slot passes to the next waiting task, or is given back.
      const next = slot.waiting.shift();
      if (next) next();
      else if (--slot.active === 0) this.tenants.delete(tenantId);
    }
  }
}
