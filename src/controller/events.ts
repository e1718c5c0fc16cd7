import { appendTo } from '../collections.js';
import type { ControllerEvent } from './notify.js';
import type { ControllerStatus, ResourceStatus } from './status.js';

/**
 * The events of a finished run, for the notifier: what changed between the status before the
 * run and after it. The notifier drops repeats, so a condition that persists (a degraded
 * resource, drift in drift mode) is passed on at every run and announced once.
 */

const subjectOf = (r: Pick<ResourceStatus, 'yaml_kind' | 'project' | 'name'>) =>
  `${r.yaml_kind} ${r.project ? `${r.project}/` : ''}${r.name}`;
const FAILED = new Set(['incomplete', 'plan-error', 'error', 'invalid']);
const WRITES = new Set(['create', 'update', 'replace', 'delete']);

/** An event's message from a list: the first three lines, and how many more. */
const firstThree = (lines: string[]) => `${lines.slice(0, 3).join('; ')}${lines.length > 3 ? ` (and ${lines.length - 3} more)` : ''}`;

export interface RunSnapshot {
  revision: string | null;
  converged: string | null;
  resources: ResourceStatus[];
}

export function runEvents(before: RunSnapshot, after: ControllerStatus): ControllerEvent[] {
  const run = after.last_run;
  if (!run || run.result === 'stopped') return [];
  const revision = run.revision;
  const events: ControllerEvent[] = [];
  const stateBefore = statesInTrouble(before.resources);
  for (const r of after.resources) {
    const subject = subjectOf(r);
    const was = stateBefore(r);
    if (r.state === 'degraded')
      events.push({ reason: 'ResourceDegraded', severity: 'error', subject, message: r.health_reason ?? r.detail ?? 'degraded', revision });
    else if (was === 'degraded' && r.health !== 'degraded')
      events.push({
        reason: 'ResourceRecovered',
        severity: 'info',
        subject,
        message: `healthy again${r.state === 'applied' ? ` (${r.detail})` : ''}`,
        revision,
      });
    else if (was === 'drifted' && r.state === 'in-sync')
      events.push({ reason: 'DriftCorrected', severity: 'info', subject, message: 'no longer differs from the configuration', revision });
    if (r.state === 'drifted')
      events.push({
        reason: 'DriftDetected',
        severity: 'error',
        subject,
        message: `differs from the configuration: ${r.detail ?? ''}`,
        revision,
      });
    // Applied while the revision stayed the same: the platform had drifted, and this run put it back.
    if (r.state === 'applied' && WRITES.has(r.action) && revision === before.revision)
      events.push({
        reason: 'DriftCorrected',
        severity: 'info',
        subject,
        message: `${r.detail ?? r.action}: the platform matches the configuration again`,
        revision,
      });
  }
  // The run's own events last: a revision is announced applied after what its run did to each resource.
  const converged = after.revision.converged?.id ?? null;
  if (converged && converged !== before.converged)
    events.push({
      reason: 'RevisionApplied',
      severity: 'info',
      subject: after.controller.source_id,
      message: `revision ${converged.slice(0, 12)}${after.revision.converged?.summary ? ` (${after.revision.converged.summary})` : ''} is applied and healthy`,
      revision,
    });
  // What the plan warns of (a project kept from prune, a referrer outside the config): the run went on.
  const warnings = run.warnings ?? [];
  if (warnings.length)
    events.push({
      reason: 'PlanWarning',
      severity: 'warning',
      subject: after.controller.source_id,
      message: firstThree(warnings),
      revision,
    });
  if (FAILED.has(run.result)) {
    events.push({
      reason: 'ApplyFailed',
      severity: 'error',
      subject: after.controller.source_id,
      message: `${run.result}: ${firstThree(run.errors)}`,
      revision,
    });
  }
  return events;
}

/**
 * What a row's resource was before the run, if it was degraded or drifted (the states an event
 * follows up on). Rows are found by name, then kind and project: a key per row joined from the
 * three would be a new string to hash for each of 100,000 rows at every run.
 */
function statesInTrouble(rows: ResourceStatus[]): (row: ResourceStatus) => ResourceStatus['state'] | undefined {
  const byName = new Map<string, ResourceStatus[]>();
  for (const r of rows) if (r.state === 'degraded' || r.state === 'drifted') appendTo(byName, r.name, r);
  return (row) => byName.get(row.name)?.find((r) => r.yaml_kind === row.yaml_kind && r.project === row.project)?.state;
}
