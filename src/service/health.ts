import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from './context.js';
import { ApiError } from './errors.js';

/** How long /readyz waits for the database before it says the service is not ready. */
export const READY_TIMEOUT_MS = 2_000;
/** How long one check of the database answers every /readyz: a flood of probes is one query a second. */
const READY_CACHE_MS = 1_000;

/**
 * Probes for a load balancer or Kubernetes, as the controller has: `GET /healthz` (the process
 * answers: 200) and `GET /readyz` (it can serve requests: its database answers a `SELECT 1` within
 * 2 s: 200, else 503 in the spec's envelope, with Retry-After). Without them a load balancer in
 * front of replicas kept sending requests to one whose database was gone. Served on any host to
 * anyone, and not counted against the per-address budget, which is kept in the database (a probe
 * of a service whose database is down failed on its budget): /healthz costs nothing, and one check
 * of the database answers every /readyz for a second.
 */
export function registerHealth(app: FastifyInstance, ctx: ServiceContext): void {
  const settings = { tenantless: true, public: true, unmetered: true };
  app.get('/healthz', { schema: { hide: true }, config: { settings } }, async () => ({ status: 'ok' }));
  let last: { at: number; ready: Promise<boolean> } | undefined;
  app.get('/readyz', { schema: { hide: true }, config: { settings } }, async () => {
    const now = Date.now();
    if (!last || now - last.at >= READY_CACHE_MS) last = { at: now, ready: databaseAnswers(ctx) };
    if (await last.ready) return { status: 'ready' };
    // Never the database's own error: it names its address.
    throw new ApiError('internal_error', 'not ready: the database does not answer', undefined, 503, { 'Retry-After': '5' });
  });
}

/** Whether the database answers a `SELECT 1` within READY_TIMEOUT_MS. */
async function databaseAnswers(ctx: ServiceContext): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), READY_TIMEOUT_MS)));
  try {
    return await Promise.race([ctx.db.get('SELECT 1 AS ok').then(() => true), timeout]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
