import type { Runtime } from './runtime.js';
import { yieldToLoop } from './slices.js';
import { runtimeWorker } from './workers.js';
import { padToBucket, paramList, planEachTime } from '../store/db.js';

/**
 * Deletes rows that otherwise only grow, and that nothing reads once they are old:
 * - schedule claims (`schedule_ticks`), one per scheduled run: a claim only matters while another
 *   replica could claim the same tick (seconds); 100,000 connectors every 15 minutes add 9.6
 *   million a day;
 * - access and refresh tokens past their expiry (one of each per sign-in and refresh), and a
 *   session once its last refresh token is gone (it can never be refreshed again).
 * - audit log entries older than `--audit-retention` days (400 by default; 0 keeps them): one per
 *   write, and a tenant's writes are bounded only by its rate limit.
 * Rows are kept a day past those times (an expired token still gets its own message meanwhile).
 * Each table is swept through an index on its time column, BATCH rows a statement with a turn of
 * the event loop between statements, at most MAX_BATCHES per sweep: a sweep costs what expired
 * since the last one, never a pass over the table. Every replica sweeps; deleting a row twice is harmless.
 */
export const RETENTION_SWEEP_MS = 60_000;
export const KEEP_PAST_MS = 24 * 3_600_000;
const BATCH = 2_000;
const MAX_BATCHES = 25;

/**
 * A table, the columns of its key and the time after which its rows may go (indexed: migration 9);
 * `owner`: the column naming the row that owns each one, deleted with its last row.
 */
interface Swept {
  table: string;
  key: string;
  time: string;
  owner?: { column: string; table: string };
  /** How long past its time a row is kept (default KEEP_PAST_MS); 0: kept for ever. */
  keepMs?: (rt: Runtime) => number;
  /** Rows someone may miss: each sweep that deletes some says how many, what and why, in the log. */
  announce?: (rt: Runtime, count: number) => string;
}
const SWEPT: readonly Swept[] = [
  { table: 'schedule_ticks', key: 'resource_id, tick', time: 'claimed_at' },
  { table: 'access_tokens', key: 'hash', time: 'expires_at' },
  { table: 'refresh_tokens', key: 'hash', time: 'expires_at', owner: { column: 'session_id', table: 'sessions' } },
  {
    table: 'audit_logs',
    key: 'id',
    time: 'ts',
    keepMs: (rt) => rt.ctx.options.auditRetentionDays * 86_400_000,
    announce: (rt, count) =>
      `deleted ${count} audit log entries older than ${rt.ctx.options.auditRetentionDays} days (--audit-retention; 0 keeps every entry)`,
  },
];

/**
 * One batch of a table's old rows, oldest first through its time index. Planned with its value: a
 * generic plan, guessing how many rows are old, could read the whole table to find none.
 */
export function sweepStatement({ table, key, time, owner }: Swept): string {
  const returning = owner ? ` RETURNING ${owner.column}` : '';
  return planEachTime(
    `DELETE FROM ${table} WHERE (${key}) IN (SELECT ${key} FROM ${table} WHERE ${time} < ? ORDER BY ${time} LIMIT ${BATCH})${returning}`,
  );
}

/** The owners of the rows just swept that have none left (their id, then the lookup by owner column: migration 10). */
export function orphanStatement({ table, owner }: Swept, count: number): string {
  return `DELETE FROM ${owner!.table} WHERE id IN (${paramList(count)}) AND NOT EXISTS (SELECT 1 FROM ${table} WHERE ${table}.${owner!.column} = ${owner!.table}.id)`;
}

export const SWEPT_TABLES = SWEPT;

export class Retention {
  private timer?: NodeJS.Timeout;
  private sweeping: Promise<unknown> = Promise.resolve();
  private stopped = false;

  constructor(private readonly rt: Runtime) {}

  start(): void {
    let busy = false;
    this.timer = setInterval(() => {
      if (busy) return; // a sweep longer than the interval: the next one waits its turn
      busy = true;
      this.sweeping = this.sweep()
        .catch((err) => this.rt.log?.error({ err }, 'retention sweep failed'))
        .finally(() => (busy = false));
    }, RETENTION_SWEEP_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.sweeping;
  }

  /** One sweep of every table: the rows whose time is more than its keepMs (KEEP_PAST_MS) ago (service clock). Returns how many went. */
  async sweep(): Promise<number> {
    let deleted = 0;
    for (const swept of SWEPT) {
      const keep = swept.keepMs?.(this.rt) ?? KEEP_PAST_MS;
      if (!keep) continue;
      const before = new Date(this.rt.nowMs() - keep).toISOString();
      let fromTable = 0;
      for (let batch = 0; batch < MAX_BATCHES && !this.stopped; batch++) {
        const changes = await this.sweepBatch(swept, before);
        fromTable += changes;
        if (changes < BATCH) break;
        await yieldToLoop();
      }
      if (fromTable && swept.announce)
        this.rt.log?.info({ table: swept.table, deleted: fromTable, before }, swept.announce(this.rt, fromTable));
      deleted += fromTable;
    }
    return deleted;
  }

  /** One batch of a table, and the owners it left with no rows. Returns how many rows of the table went. */
  private async sweepBatch(swept: Swept, before: string): Promise<number> {
    const { db } = this.rt.ctx;
    if (!swept.owner) return (await db.run(sweepStatement(swept), [before])).changes;
    const gone = await db.all<Record<string, string>>(sweepStatement(swept), [before]);
    const owners = padToBucket([...new Set(gone.map((row) => row[swept.owner!.column]))]);
    if (owners.length) await db.run(orphanStatement(swept, owners.length), owners);
    return gone.length;
  }
}

/** The retention sweeper of a runtime (one per service), sweeping while the service runs. */
const retentions = runtimeWorker((rt) => new Retention(rt));
export const retentionOf = retentions.of;
export const installRetention = retentions.install;
