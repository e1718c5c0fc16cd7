import type { Db } from './store/db.js';
import { newId } from './ids.js';
import type { Actor } from './auth/actor.js';

export const REDACTED = '(redacted)';

export interface AuditEvent {
  tenantId: string;
  projectId: string | null;
  actor: Pick<Actor, 'type' | 'id' | 'name'> | { type: 'anonymous'; id: null; name: string | null };
  action: string;
  resourceType: string;
  resourceId: string | null;
  resourceName: string | null;
  requestId: string;
  statusCode: number;
  diff: Diff | null;
  timestamp: string;
}

/** Field-by-field changes between two API views of a resource; secret changes show as redacted. */
export function auditDiff(
  before: Record<string, unknown> | null,
  after: Record<string, unknown> | null,
  changedSecrets: string[] = [],
): Record<string, { before: unknown; after: unknown }> {
  const diff: Record<string, { before: unknown; after: unknown }> = {};
  const keys = new Set([...Object.keys(before ?? {}), ...Object.keys(after ?? {})]);
  for (const key of keys) {
    if (key === 'updated_at' || key === 'created_at') continue;
    const b = before?.[key];
    const a = after?.[key];
    if (JSON.stringify(b) !== JSON.stringify(a)) diff[key] = { before: b ?? null, after: a ?? null };
  }
  for (const path of changedSecrets) diff[path] = { before: REDACTED, after: REDACTED };
  return diff;
}

/** Most bytes of one entry's diff; past it the largest values are replaced by a note of their size. */
export const AUDIT_DIFF_BYTES = 64 * 1024;

type Diff = Record<string, { before: unknown; after: unknown }>;

/**
 * The diff as stored: whole while its JSON fits in AUDIT_DIFF_BYTES, else with its largest values
 * (before or after) replaced, largest first, by `(omitted: N bytes)` until it fits. Creating or
 * deleting a 1 MiB connector wrote its whole JSON to the audit log (a create and delete loop at
 * the rate limit: about 1.2 GB a minute of audit entries); which fields changed, and how, stays.
 */
export function storedDiff(diff: Diff): string {
  const json = JSON.stringify(diff);
  if (json.length <= AUDIT_DIFF_BYTES) return json;
  const sizes = Object.entries(diff)
    .flatMap(([field, change]) =>
      (['before', 'after'] as const).map((side) => ({ field, side, bytes: JSON.stringify(change[side])?.length ?? 0 })),
    )
    .sort((a, b) => b.bytes - a.bytes);
  const bounded: Diff = Object.fromEntries(Object.entries(diff).map(([field, change]) => [field, { ...change }]));
  let total = json.length;
  for (const { field, side, bytes } of sizes) {
    if (total <= AUDIT_DIFF_BYTES) break;
    const note = `(omitted: ${bytes.toLocaleString('en-US')} bytes)`;
    bounded[field][side] = note;
    total -= bytes - note.length - 2;
  }
  return JSON.stringify(bounded);
}

export class AuditLog {
  constructor(private readonly db: Db) {}

  async record(e: AuditEvent): Promise<void> {
    await this.db.run(
      `INSERT INTO audit_logs (id, tenant_id, project_id, ts, actor_type, actor_id, actor_name, action, resource_type, resource_id, resource_name, request_id, outcome, status_code, diff)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [
        newId('audit'),
        e.tenantId,
        e.projectId,
        e.timestamp,
        e.actor.type,
        e.actor.id,
        e.actor.name,
        e.action,
        e.resourceType,
        e.resourceId,
        e.resourceName,
        e.requestId,
        e.statusCode < 400 ? 'success' : 'failure',
        e.statusCode,
        e.diff ? storedDiff(e.diff) : null,
      ],
    );
  }
}
