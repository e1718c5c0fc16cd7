import type { ControllerStatus, ResourceStatus } from './status.js';

/**
 * `GET /status.json?view=summary`: the status without the rows of resources that are fine and
 * without the drift entries, with the rows counted instead. The whole status grows with the
 * config: 28 MB of JSON at 100,000 resources (37 MB in drift mode), 150-390 ms of the
 * controller's event loop to serialise, and `dpctl controller reconcile` read it every 500 ms
 * to print a few lines. `dpctl controller status` and `reconcile` read this view.
 */

/** Row states that are a problem: listed one by one in the summary (and by `dpctl controller status`). */
export const PROBLEMS = new Set<ResourceStatus['state']>(['degraded', 'failed', 'backoff']);

export interface ResourceCounts {
  /** Rows by state. */
  by_state: Record<string, number>;
  /** Rows of resources the revision declares. */
  declared: number;
  /** Rows of resources the last run deleted (prune); a delete not made (refused, failed) is not counted. */
  pruned: number;
  /** Drift entries the last run found. */
  drift: number;
}

export type StatusSummary = ControllerStatus & { view: 'summary'; resource_counts: ResourceCounts };

export function resourceCounts(s: Pick<ControllerStatus, 'resources' | 'drift'>): ResourceCounts {
  const byState: Record<string, number> = {};
  let deletes = 0;
  let pruned = 0;
  for (const r of s.resources) {
    byState[r.state] = (byState[r.state] ?? 0) + 1;
    if (r.action !== 'delete') continue;
    deletes++;
    if (r.state === 'applied') pruned++;
  }
  return { by_state: byState, declared: s.resources.length - deletes, pruned, drift: s.drift.length };
}

export function statusSummary(s: ControllerStatus): StatusSummary {
  return {
    ...s,
    view: 'summary',
    resources: s.resources.filter((r) => PROBLEMS.has(r.state)),
    drift: [],
    resource_counts: resourceCounts(s),
  };
}
