import { isDatabaseUnavailable } from '../store/unavailable.js';

/** The logger the runtime writes to (the service's pino logger). */
export interface RuntimeLogger {
  error(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

/**
 * The runtime's log, with a database outage said once. While the database is down every background
 * loop (heartbeat, sweep, scheduler, retention) fails every few seconds; each logged a full stack,
 * burying the one line an operator needs. The first failure that says the database is unavailable
 * is one error line (its reason, no stack); the same failures after it are counted, not logged; the
 * first heartbeat that gets through says the outage ended, how long it lasted and how many failures
 * went unlogged. Any other failure is logged as it is, stack and all.
 */
export class BackgroundLog implements RuntimeLogger {
  #outage: { since: number; unlogged: number } | undefined;

  constructor(
    private readonly log: RuntimeLogger,
    private readonly now: () => number = Date.now,
  ) {}

  get inOutage(): boolean {
    return this.#outage !== undefined;
  }

  error(obj: object, msg: string): void {
    const err = (obj as { err?: unknown }).err;
    if (!isDatabaseUnavailable(err)) return this.log.error(obj, msg);
    if (this.#outage) {
      this.#outage.unlogged++;
      return;
    }
    this.#outage = { since: this.now(), unlogged: 0 };
    const reason = err instanceof Error ? err.message : String(err);
    this.log.error(
      { failed: msg, reason },
      'the database is unavailable: runs, schedules and heartbeats wait until it answers (further failures of this kind are not logged until then)',
    );
  }

  info(obj: object, msg: string): void {
    this.log.info(obj, msg);
  }

  /** A background write got through: ends an outage, if there was one. */
  answered(): void {
    if (!this.#outage) return;
    const { since, unlogged } = this.#outage;
    this.#outage = undefined;
    this.log.info({ seconds: Math.round((this.now() - since) / 1000), unlogged }, 'the database answers again');
  }
}
