import { appendTo } from '../collections.js';
import { kind as kindNamed } from '../kinds/index.js';
import { projectKey, resourceKey, type Plan, type PlannedChange } from '../engine/index.js';

/**
 * Takes the changes whose resource is backing off out of a plan, and with them the writes
 * that need one of those resources first (its project, what it references), so that the
 * apply neither retries a failing resource early nor fails its dependents for it. Returns the
 * plan to apply and why each change was held back.
 */
export function deferChanges(
  plan: Plan,
  waiting: (key: string) => string | undefined,
): { plan: Plan; deferred: Map<PlannedChange, string> } {
  const deferred = new Map<PlannedChange, string>();
  const held: PlannedChange[] = []; // writes not made this run, in the order they are found
  for (const c of plan.changes) {
    if (c.action === 'no-op') continue;
    const why = waiting(c.key);
    if (why === undefined) continue;
    deferred.set(c, why);
    if (c.action !== 'delete') held.push(c);
  }
  const needs = (c: PlannedChange): string[] => {
    const doc = c.doc;
    if (!doc || c.action === 'delete') return [];
    const keys: string[] = [];
    if (doc.project !== undefined) keys.push(projectKey(doc.project));
    for (const ref of doc.references) {
      try {
        keys.push(resourceKey(kindNamed(ref.kind), doc.project, ref.name));
      } catch {
        // An unknown kind was already a validation error.
      }
    }
    return keys;
  };
  // The writes each held write blocks, indexed once (not a pass over every change per link of a chain).
  const blocked = new Map<string, PlannedChange[]>();
  if (held.length) for (const c of plan.changes) if (c.action !== 'no-op' && !deferred.has(c)) for (const k of needs(c)) appendTo(blocked, k, c);
  for (let i = 0; i < held.length; i++) {
    const blocker = held[i];
    for (const c of blocked.get(blocker.key) ?? []) {
      if (deferred.has(c)) continue;
      deferred.set(c, `waits for ${blocker.yamlKind} ${blocker.project ? `${blocker.project}/` : ''}${blocker.name}, which is backing off`);
      held.push(c);
    }
  }
  if (!deferred.size) return { plan, deferred };
  return { plan: { ...plan, changes: plan.changes.filter((c) => !deferred.has(c)) }, deferred };
}
