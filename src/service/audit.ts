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
  diff: Record<string, { before: unknown; after: unknown }> | null;
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
        e.diff ? JSON.stringify(e.diff) : null,
      ],
    );
  }
}
