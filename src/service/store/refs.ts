import { KINDS } from '../../kinds/index.js';
import { formatPath, valuesAt, type FieldPath } from '../../kinds/walk.js';
import { insertRows, paramList, type Queryable } from './db.js';

/**
 * The `resource_refs` table: one row per id a resource names in its data (the descriptors'
 * `references`, `x-ref` in schemas/), so "is this still used?" before a delete is one indexed
 * lookup instead of reading and parsing every pipeline, alert rule and dbt project of the project
 * (which grew with the project on every delete, and, on SQLite, held every tenant's requests).
 */

/** Where each referring kind names other resources. */
const REFERENCES: ReadonlyMap<string, FieldPath[]> = new Map(
  [...KINDS.values()].filter((d) => d.references.length > 0).map((d) => [d.kind, d.references.map((r) => r.path)]),
);

/** One id named by a resource, and where (`steps[0].connector_id`). */
export interface Ref {
  target: string;
  path: string;
}

type Referrer = { id: string; tenantId: string; projectId: string; kind: string; data: Record<string, unknown> };

/** The ids a resource of `kind` names in `data`, in path order. */
export function refsOf(kind: string, data: Record<string, unknown>): Ref[] {
  const refs: Ref[] = [];
  for (const pattern of REFERENCES.get(kind) ?? []) {
    for (const { path, value } of valuesAt(data, pattern))
      if (typeof value === 'string') refs.push({ target: value, path: formatPath(path) });
  }
  return refs.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

export const hasReferences = (kind: string): boolean => REFERENCES.has(kind);

async function insertRefs(q: Queryable, r: Referrer, refs: Ref[]): Promise<void> {
  await insertRows(
    q,
    refs.map((ref) => [r.tenantId, r.projectId, ref.target, r.id, r.kind, ref.path]),
    (values) =>
      `INSERT INTO resource_refs (tenant_id, project_id, target_id, referrer_id, referrer_kind, path) VALUES ${values} ON CONFLICT (referrer_id, path) DO NOTHING`,
  );
}

/**
 * Keeps a resource's rows in step with its data. A write that leaves its references as they were
 * (a run updating a pipeline's status) reads them and writes nothing.
 */
export async function syncRefs(q: Queryable, r: Referrer, isNew: boolean): Promise<void> {
  if (!REFERENCES.has(r.kind)) return;
  const refs = refsOf(r.kind, r.data);
  if (!isNew) {
    const current = await q.all<{ target_id: string; path: string }>(
      'SELECT target_id, path FROM resource_refs WHERE referrer_id = ? ORDER BY path',
      [r.id],
    );
    const same = current.length === refs.length && current.every((c, i) => c.target_id === refs[i].target && c.path === refs[i].path);
    if (same) return;
    if (current.length) await q.run('DELETE FROM resource_refs WHERE referrer_id = ?', [r.id]);
  }
  await insertRefs(q, r, refs);
}

export async function removeRefs(q: Queryable, referrerId: string): Promise<void> {
  await q.run('DELETE FROM resource_refs WHERE referrer_id = ?', [referrerId]);
}

/** The first resource of the project (in path order of its rows) that names `targetId`, if any. */
export async function firstReferrer(
  q: Queryable,
  tenantId: string,
  projectId: string,
  targetId: string,
): Promise<{ referrer_id: string; referrer_kind: string; path: string } | undefined> {
  return q.get(
    'SELECT referrer_id, referrer_kind, path FROM resource_refs WHERE tenant_id = ? AND project_id = ? AND target_id = ? LIMIT 1',
    [tenantId, projectId, targetId],
  );
}

const BACKFILL_PAGE = 500;

/**
 * Rows for resources written before the table existed (run by its migration, in the same
 * transaction, so no delete is ever checked against a half-filled table). Pages by seq through
 * the resources_kind index; ON CONFLICT makes a second run harmless.
 */
export async function backfillRefs(q: Queryable): Promise<void> {
  const kinds = [...REFERENCES.keys()];
  for (let after = 0; ;) {
    const rows = await q.all<{ seq: number; id: string; tenant_id: string; project_id: string; kind: string; data: string }>(
      `SELECT seq, id, tenant_id, project_id, kind, data FROM resources WHERE kind IN (${paramList(kinds.length)}) AND seq > ? ORDER BY seq LIMIT ${BACKFILL_PAGE}`,
      [...kinds, after],
    );
    for (const row of rows) {
      after = Number(row.seq);
      const r = {
        id: row.id,
        tenantId: row.tenant_id,
        projectId: row.project_id,
        kind: row.kind,
        data: JSON.parse(row.data) as Record<string, unknown>,
      };
      await insertRefs(q, r, refsOf(r.kind, r.data));
    }
    if (rows.length < BACKFILL_PAGE) return;
  }
}
