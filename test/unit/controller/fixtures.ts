import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Action, Plan, PlannedChange, Prepared, Problem } from '../../../src/engine/index.js';

/** A plan problem with no place in the configuration (a reference the server does not have...). */
export const problem = (message: string, subject?: string): Problem => ({ code: 'unresolved_reference', subject, message });
import type { ControllerStatus } from '../../../src/controller/status.js';
import type { Revision } from '../../../src/controller/source/types.js';

/** Small fixtures for the controller's steps: plans of a few users, revisions on disk, a logger that keeps its lines. */

export const change = (name: string, action: Action, extra: Partial<PlannedChange> = {}): PlannedChange => ({
  kind: 'user',
  yamlKind: 'User',
  name,
  changes: action === 'update' ? [{ field: 'role' } as PlannedChange['changes'][number]] : [],
  action,
  reasons: [],
  notes: [],
  ownership: action === 'create' ? 'new' : 'owned',
  key: `user\u0000\u0000${name}`,
  patchFields: [],
  ...extra,
});

export function planOf(changes: PlannedChange[], errors: Problem[] = []): Plan {
  const count = (a: Action) => changes.filter((c) => c.action === a).length;
  return {
    sourceId: 'platform',
    changes,
    errors,
    warnings: [],
    managedCount: 0,
    summary: { create: count('create'), update: count('update'), replace: count('replace'), delete: count('delete'), 'no-op': count('no-op'), unsupported: 0 },
  };
}

/** A plan as preparePlan returns it, against an empty platform. */
export const prepared = (plan: Plan): Prepared => ({
  documents: [],
  secrets: {} as Prepared['secrets'],
  state: { projects: new Map(), resources: new Map(), byId: new Map(), listed: new Set(), warnings: [] },
  plan,
});

const VALID_USER = 'apiVersion: dataplatform/v1\nkind: User\nmetadata:\n  name: dana@example.com\nspec:\n  name: Dana\n  role: read-write\n';
const INVALID_USER = 'apiVersion: dataplatform/v1\nkind: User\nmetadata:\n  name: dana@example.com\nspec:\n  name: Dana\n  role: read-write\n  nope: 1\n';

/** A revision on disk: one User document, valid or with an unknown field. */
export function revisionOnDisk(id: string, valid = true): Revision {
  const root = mkdtempSync(join(tmpdir(), 'dp-ctl-unit-'));
  writeFileSync(join(root, 'users.yaml'), valid ? VALID_USER : INVALID_USER);
  return { id, configDir: root, root, summary: `commit ${id}` };
}

export interface LogLine {
  level: string;
  fields: Record<string, unknown>;
  message: string;
}

/** A pino-shaped logger that keeps what it is told. */
export function memoryLogger(): Logger & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  const at =
    (level: string) =>
    (fields: Record<string, unknown> | string, message?: string): void => {
      lines.push(typeof fields === 'string' ? { level, fields: {}, message: fields } : { level, fields, message: message ?? '' });
    };
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), fatal: at('fatal') } as unknown as Logger & {
    lines: LogLine[];
  };
}

/** The controller part of a status, for a StatusBoard. */
export const controllerInfo = (): ControllerStatus['controller'] => ({
  mode: 'apply',
  source: 'directory /platform',
  source_id: 'platform',
  interval_ms: 30_000,
  prune: false,
  test_connections: false,
  suspended: false,
  ready: false,
  leader: { elected: false, identity: 'test', election: 'none' },
  started_at: '2026-01-01T00:00:00.000Z',
});
