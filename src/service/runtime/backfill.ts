import { paramList, type Db } from '../store/db.js';
import { slicer } from './slices.js';

export interface BackfillRow {
  seq: number;
  id: string;
  tenant_id: string;
  project_id: string;
  kind: string;
  parent_id: string;
  data: string;
}

const PAGE = 200;

/**
 * Runs `each` over every stored resource of `kinds`, once per database: for tables a migration
 * added whose rows derive from resources written before it (schedules, open alerts). Pages of 200
 * by seq through the resources_kind index, in slices (slices.ts); a `meta` mark records that it finished, so a restart after that reads nothing. `each` must
 * be idempotent (a crash mid-way runs it again) and lose to rows written meanwhile (ON CONFLICT DO
 * NOTHING).
 */
export async function backfillOnce(
  db: Db,
  mark: string,
  kinds: string[],
  each: (row: BackfillRow) => Promise<void>,
  stopped: () => boolean,
): Promise<void> {
  if (await db.get('SELECT value FROM meta WHERE key = ?', [mark])) return;
  if (kinds.length) {
    const slice = slicer();
    for (let after = 0; ;) {
      if (stopped()) return;
      const rows = await db.all<BackfillRow>(
        `SELECT seq, id, tenant_id, project_id, kind, parent_id, data FROM resources WHERE kind IN (${paramList(kinds.length)}) AND seq > ? ORDER BY seq LIMIT ${PAGE}`,
        [...kinds, after],
      );
      for (const row of rows) {
        after = Number(row.seq);
        await each(row);
        await slice();
      }
      if (rows.length < PAGE) break;
    }
  }
  await db.run('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING', [mark, new Date().toISOString()]);
}
