import type { Actor } from './actor.js';
import type { KeyReach } from '../context.js';
import { forbidden, notFound } from '../errors.js';

const VERBS: Record<string, string> = {
  GET: 'reading',
  HEAD: 'reading',
  POST: 'creating',
  PUT: 'replacing',
  PATCH: 'changing',
  DELETE: 'deleting',
};

/**
 * Least privilege for API keys: a key belongs to one project and reaches nothing else.
 * Every authenticated route declares `settings.keys`; a route that does not say is closed
 * to keys (fail closed), so a new tenant-level route cannot leak users or SSO settings.
 *
 * `own-project` routes under `/projects/:id/...` are checked here too, before the body is
 * even validated: another project is "not found", never "forbidden", so its existence is
 * not revealed. Handlers still narrow further (resolveProject, visibleToKey).
 */
export function assertKeyMayReach(
  actor: Actor,
  reach: KeyReach | undefined,
  route: { method: string; url?: string; params: unknown },
): void {
  if (actor.type !== 'api_key') return;
  if (reach !== 'own-project') {
    // "creating users", "reading sso-providers": the collection is the route's last fixed segment.
    const what =
      (route.url ?? '')
        .split('/')
        .filter((s) => s && !s.startsWith(':'))
        .pop() ?? 'this';
    throw forbidden(`API keys are limited to their project; ${VERBS[route.method] ?? route.method} ${what} needs a user token`);
  }
  const projectId = (route.params as { id?: unknown } | undefined)?.id;
  if (projectId !== undefined && projectId !== actor.projectId) throw notFound('Project');
}
