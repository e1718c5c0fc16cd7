import type { Db, SqlValue } from '../../src/service/store/db.js';

/**
 * Stores `count` rows straight into a table, 1,000 per statement: scale tests' data, made in
 * seconds instead of through the API. `row(n)` gives the values of row n, in `columns` order.
 */
export async function bulkInsert(db: Db, table: string, columns: string[], count: number, row: (n: number) => SqlValue[]): Promise<void> {
  const marks = `(${columns.map(() => '?').join(', ')})`;
  for (let start = 0; start < count; start += 1_000) {
    const n = Math.min(1_000, count - start);
    const params = Array.from({ length: n }, (_, i) => row(start + i)).flat();
    await db.run(`INSERT INTO ${table} (${columns.join(', ')}) VALUES ${Array(n).fill(marks).join(', ')}`, params);
  }
}

/** The columns of a resource row that bulkInsert needs (the rest have defaults). */
export const RESOURCE_COLUMNS = ['id', 'tenant_id', 'project_id', 'kind', 'parent_id', 'name', 'data', 'created_at', 'updated_at'];
