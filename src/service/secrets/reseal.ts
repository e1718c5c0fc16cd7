import { valuesList, type Db } from '../store/db.js';
import type { SecretCipher } from './cipher.js';
import { yieldToLoop } from '../runtime/slices.js';

/** Rows of seq range examined per query: bounded work per step, whatever the store's size or how sparse secrets are. */
export const RESEAL_WINDOW = 1000;
/**
 * Rows resealed per transaction. Sealing costs about 75 µs of CPU per row (two AES-GCM
 * operations and fresh random keys), so 50 rows keep each synchronous step to a few ms.
 */
export const RESEAL_CHUNK = 50;

export interface ResealOptions {
  /** Which stored values to reseal (clear ones on start-up; all not under the new key on rotation). */
  select: (stored: string) => boolean;
  signal?: AbortSignal;
  window?: number;
  onProgress?: (p: { resealed: number; seq: number; maxSeq: number }) => void;
}

/**
 * Reseals the `secrets` column of every selected row under the cipher's primary key, one seq
 * window per transaction, yielding to the event loop between windows so requests are served
 * meanwhile. Each row is written only if it still holds what was read (compare-and-set), so a
 * concurrent PATCH or another replica doing the same work is never overwritten, and a re-run
 * after a crash skips what is done: it is idempotent.
 */
export async function resealRows(db: Db, cipher: SecretCipher, options: ResealOptions): Promise<number> {
  const window = options.window ?? RESEAL_WINDOW;
  const maxSeq = Number((await db.get<{ m: number | null }>('SELECT MAX(seq) AS m FROM resources'))?.m ?? 0);
  let resealed = 0;
  for (let from = 0; from < maxSeq; from += window) {
    if (options.signal?.aborted) break;
    const rows = await db.all<{ id: string; tenant_id: string; secrets: string }>(
      'SELECT id, tenant_id, secrets FROM resources WHERE seq > ? AND seq <= ? AND secrets IS NOT NULL',
      [from, from + window],
    );
    const todo = rows.filter((r) => options.select(r.secrets));
    for (let i = 0; i < todo.length && !options.signal?.aborted; i += RESEAL_CHUNK) {
      resealed += await resealChunk(db, cipher, todo.slice(i, i + RESEAL_CHUNK));
      await yieldToLoop();
    }
    options.onProgress?.({ resealed, seq: Math.min(from + window, maxSeq), maxSeq });
    await yieldToLoop();
  }
  return resealed;
}

async function resealChunk(db: Db, cipher: SecretCipher, rows: { id: string; tenant_id: string; secrets: string }[]): Promise<number> {
  // Sealed before the write, so SQLite's write lock is held only for the update.
  const next = rows.map((r) => cipher.seal(cipher.open(r.secrets, r.tenant_id, r.id), r.tenant_id, r.id));
  // One statement per chunk (a round trip per row made PostgreSQL cost 1.7 ms a row). VALUES columns
  // are column1..3 in both SQLite and PostgreSQL; `secrets = column2` is the compare-and-set.
  const values = valuesList(rows.length, 3);
  const params = rows.flatMap((r, i) => [r.id, r.secrets, next[i]]);
  const { changes } = await db.run(
    `UPDATE resources SET secrets = v.column3 FROM (VALUES ${values}) AS v WHERE resources.id = v.column1 AND resources.secrets = v.column2`,
    params,
  );
  return changes;
}

/**
 * Runs a reseal so that the replaced values do not linger on disk: on SQLite, freed cell
 * space is zeroed (secure_delete) and the WAL is checkpointed and truncated afterwards, since
 * old page versions stay in it otherwise. PostgreSQL keeps dead row versions until VACUUM
 * (documented: run VACUUM FULL resources after the first start or a rotation).
 */
export async function withScrub<T>(db: Db, fn: () => Promise<T>): Promise<T> {
  if (db.dialect !== 'sqlite') return fn();
  await db.run('PRAGMA secure_delete = ON');
  try {
    return await fn();
  } finally {
    await db.run('PRAGMA wal_checkpoint(TRUNCATE)');
    await db.run('PRAGMA secure_delete = OFF');
  }
}
