import { healthOf, type Health, type HealthStatus } from '../kinds/index.js';
import type { DataPlatformClient } from '../client/index.js';
import { appendTo } from '../collections.js';
import { collectionKey, mapLimit, resourceKey, type LiveObject } from './observe.js';
import { subjectOfChange, type Plan, type PlannedChange } from './plan.js';

/**
 * Health of what the config declares, from each kind's `x-health` rule (healthOf). A plan
 * carries the health observed before it; after an apply, waitForHealth lists the kinds again
 * until nothing it touched is still progressing.
 */

export interface HealthEntry {
  /** The resource's key, as its planned change's (`PlannedChange.key`): what joins health to other rows of the change. */
  key: string;
  subject: string;
  kind: string;
  project?: string;
  name: string;
  health: Health;
  reason?: string;
  /** Healthy, but never run: nothing has shown that it works (HealthStatus.neverRun). */
  neverRun?: true;
  /** Healthy, but changed since it last ran: its current settings are untried (HealthStatus.changedSinceRun). */
  changedSinceRun?: true;
}

/** Sets `health` on every planned change of a resource that exists. */
export function attachHealth(plan: Plan): void {
  for (const c of plan.changes) if (c.live && c.action !== 'delete') c.health = healthOf(c.live.descriptor, c.live.object);
}

/** Declared resources that are not healthy, as observed for the plan. */
export function unhealthy(plan: Plan): HealthEntry[] {
  return plan.changes.filter((c) => c.health && c.health.health !== 'healthy').map((c) => healthEntry(c, c.health!));
}

export const healthEntry = (c: PlannedChange, h: HealthStatus): HealthEntry => ({
  key: c.key,
  subject: subjectOfChange(c),
  kind: c.kind,
  project: c.project,
  name: c.name,
  health: h.health,
  reason: h.reason,
  ...(h.neverRun && { neverRun: h.neverRun }),
  ...(h.changedSinceRun && { changedSinceRun: h.changedSinceRun }),
});

/** Counts by health, for summary lines ("1 degraded, 2 progressing"). */
export function healthCounts(entries: HealthEntry[]): string {
  const counts = new Map<Health, number>();
  for (const e of entries) counts.set(e.health, (counts.get(e.health) ?? 0) + 1);
  return [...counts].map(([h, n]) => `${n} ${h}`).join(', ');
}

export interface HealthWaitOptions {
  /** Project name -> id after the apply (new projects included). */
  projectIds: Map<string, string>;
  deadline: number;
  concurrency: number;
  signal?: AbortSignal;
  pollMs?: number;
  onProgress?: (line: string) => void;
}

/**
 * Waits until none of `changes` (the declared resources to watch) is progressing, re-listing
 * only the (kind, project) collections they live in: never one GET per resource. Returns the
 * final health of each; those still progressing at the deadline are reported as such.
 */
export async function waitForHealth(client: DataPlatformClient, changes: PlannedChange[], o: HealthWaitOptions): Promise<HealthEntry[]> {
  const watched = changes.filter((c) => c.doc?.descriptor.health);
  let results = new Map<PlannedChange, HealthStatus>();
  let wait = o.pollMs ?? 500;
  for (;;) {
    results = await observeHealth(client, watched, o);
    const progressing = [...results.values()].filter((h) => h.health === 'progressing').length;
    if (!progressing || Date.now() + wait > o.deadline) break;
    o.onProgress?.(`  waiting for ${progressing} resource${progressing === 1 ? '' : 's'} to settle`);
    await new Promise((resolve) => setTimeout(resolve, wait));
    wait = Math.min(wait * 2, 4_000);
  }
  return watched.map((c) => healthEntry(c, results.get(c) ?? { health: 'unknown', reason: 'not found after the apply' }));
}

async function observeHealth(
  client: DataPlatformClient,
  watched: PlannedChange[],
  o: HealthWaitOptions,
): Promise<Map<PlannedChange, HealthStatus>> {
  const groups = new Map<string, PlannedChange[]>();
  for (const c of watched) {
    appendTo(groups, collectionKey(c.kind, c.project), c);
  }
  const out = new Map<PlannedChange, HealthStatus>();
  await mapLimit([...groups.values()], o.concurrency, async (group) => {
    const d = group[0].doc!.descriptor;
    const projectId = group[0].project !== undefined ? o.projectIds.get(group[0].project) : undefined;
    if (d.scope === 'project' && !projectId) return;
    const live = new Map<string, LiveObject>();
    for (const item of await client.resourcesOf(d.kind, { projectId }).listAll({ signal: o.signal })) {
      const obj = item as LiveObject;
      live.set(resourceKey(d, group[0].project, String(obj[d.identity])), obj);
    }
    for (const c of group) {
      const obj = live.get(c.key);
      if (obj) out.set(c, healthOf(d, obj));
    }
  });
  return out;
}
