import { createHash, timingSafeEqual } from 'node:crypto';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';

/** The event-loop delay gauges cover the last WINDOW_MS to 2 x WINDOW_MS (two rotating windows). */
const WINDOW_MS = 10_000;
/** A rendered page is reused this long, so anonymous scrapes in a loop cost one render per second. */
const CACHE_MS = 1_000;

interface Delay {
  p50: number;
  p99: number;
  max: number;
}

/** Seconds, from a histogram in nanoseconds; no samples yet reads as no delay (the histogram answers NaN / sentinels). */
function summarise(h: IntervalHistogram): Delay {
  if (h.count === 0) return { p50: 0, p99: 0, max: 0 };
  return { p50: h.percentile(50) / 1e9, p99: h.percentile(99) / 1e9, max: h.max / 1e9 };
}

/**
 * Event-loop delay over a sliding window, from perf_hooks' monitor: every WINDOW_MS the window
 * is summarised into `previous` and the monitor reset, so a stall shows for 10-20 s and is not
 * averaged away by hours of calm. Each gauge is the larger of the last whole window and the
 * current one (a histogram of the monitor cannot be merged with another).
 */
export class EventLoopDelay {
  private readonly monitor: IntervalHistogram = monitorEventLoopDelay({ resolution: 10 });
  private previous: Delay = { p50: 0, p99: 0, max: 0 };
  private readonly timer: NodeJS.Timeout;

  constructor() {
    this.monitor.enable();
    this.timer = setInterval(() => {
      this.previous = summarise(this.monitor);
      this.monitor.reset();
    }, WINDOW_MS).unref();
  }

  /** Seconds. */
  read(): Delay {
    const now = summarise(this.monitor);
    return {
      p50: Math.max(now.p50, this.previous.p50),
      p99: Math.max(now.p99, this.previous.p99),
      max: Math.max(now.max, this.previous.max),
    };
  }

  stop(): void {
    clearInterval(this.timer);
    this.monitor.disable();
  }
}

/** Compares in constant time (digests first, so lengths do not leak either). */
function sameSecret(given: string, expected: string): boolean {
  const digest = (v: string) => createHash('sha256').update(v).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

export interface ServiceMetrics {
  registry: Registry;
  stop(): void;
}

/**
 * `GET /metrics` (Prometheus text): event-loop delay and the process (CPU, memory, heap, handles,
 * GC). Tenantless and answered on any host. It carries no tenant data (no names, ids, counts per
 * tenant), so it needs no token by default, as scrapers expect; `token` makes it ask for
 * `Authorization: Bearer <token>` where the port is reachable from outside.
 */
export function registerMetrics(app: FastifyInstance, options: { token?: string } = {}): ServiceMetrics {
  const registry = new Registry();
  const loop = new EventLoopDelay();
  collectDefaultMetrics({ register: registry, prefix: 'dpctl_service_' });
  for (const [name, key, help] of [
    ['dpctl_service_event_loop_delay_p50_seconds', 'p50', 'Median event-loop delay over the last 10-20 s'],
    ['dpctl_service_event_loop_delay_p99_seconds', 'p99', '99th percentile event-loop delay over the last 10-20 s'],
    [
      'dpctl_service_event_loop_delay_max_seconds',
      'max',
      'Longest event-loop delay over the last 10-20 s: how long the slowest request may have waited',
    ],
  ] as const) {
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(loop.read()[key]);
      },
    });
  }

  let cached: { at: number; text: Promise<string> } | undefined;
  // Tenantless, so it counts against the per-address anonymous budget (--anonymous-rate-limit, 600 a
  // minute per address; request-pipeline.ts) with or without --metrics-token: the budget is taken
  // before this handler checks the token, so guesses at it are bounded too, and a scraper every 15 s
  // spends 4 of it. Not exempted when the token is right: that would mean comparing the secret on
  // every request before admission, for a scraper that never comes near the budget.
  app.get('/metrics', { schema: { hide: true }, config: { settings: { tenantless: true, public: true } } }, async (req, reply) => {
    if (options.token && !sameSecret(req.headers.authorization ?? '', `Bearer ${options.token}`)) {
      reply.code(401).type('application/json');
      return { error: { code: 'unauthorized', message: 'GET /metrics needs "Authorization: Bearer <metrics token>" (--metrics-token)' } };
    }
    const now = Date.now();
    if (!cached || now - cached.at >= CACHE_MS) cached = { at: now, text: registry.metrics() };
    reply.type(registry.contentType);
    return cached.text;
  });
  return { registry, stop: () => loop.stop() };
}
