import {
  ApiError,
  failedChanges,
  provisionProject,
  provisioningRoutes,
  ProvisioningRefused,
  ProvisioningTimeout,
  type DataPlatformClient,
  type ProvisioningChange,
  type ProvisioningPlan,
  type ProvisioningRun,
} from '../client/index.js';
import type { KindDescriptor } from '../kinds/index.js';
import { appendTo } from '../collections.js';
import type { LiveState } from './observe.js';
import type { Plan, PlannedChange } from './plan.js';

/**
 * What the platform will provision for a plan: kinds with `x-provisioning` (infrastructure
 * resources) are provisioned by a project-wide plan and apply on the platform, not by their
 * create call. `dpctl plan` shows, per project, the platform's current plan adjusted by what the
 * config changes; `dpctl apply`, once its writes are done, asks the platform for its plan again,
 * refuses one that holds a change the preview did not show (someone else's), applies exactly
 * that plan_id and waits for it.
 */

export type ProvisioningAction = 'create' | 'update' | 'delete';

export interface ExpectedProvisioning {
  action: ProvisioningAction;
  name: string;
  resource_type?: string;
  changed_fields: string[];
  /** Already in the platform's plan, or the effect of this config's change. */
  origin: 'platform' | 'config';
}

export interface ProjectProvisioning {
  project: string;
  descriptor: KindDescriptor;
  expected: ExpectedProvisioning[];
  /** Why the platform's current plan could not be read (a read-only key): the preview is the config's part only. */
  note?: string;
}

const changeKey = (action: string, name: string) => `${action}\u0000${name}`;

/** The provisioned kinds of a plan's changes, by project. */
function provisionedChanges(plan: Plan): Map<string, PlannedChange[]> {
  const out = new Map<string, PlannedChange[]>();
  for (const c of plan.changes) {
    const d = c.doc?.descriptor ?? c.live?.descriptor;
    if (!d?.provisioning || c.project === undefined) continue;
    appendTo(out, c.project, c);
  }
  return out;
}

/** The expected platform plan: its current changes, then each config change's effect on it. */
export function expectedChanges(current: ProvisioningChange[], changes: PlannedChange[]): ExpectedProvisioning[] {
  const expected = new Map<string, ExpectedProvisioning>();
  const put = (e: ExpectedProvisioning) => expected.set(changeKey(e.action, e.name), e);
  for (const c of current)
    put({ action: c.action!, name: c.name!, resource_type: c.resource_type, changed_fields: c.changed_fields ?? [], origin: 'platform' });
  for (const c of changes) {
    const neverProvisioned = expected.has(changeKey('create', c.name));
    const type = (c.doc?.body.resource_type ?? c.live?.object.resource_type) as string | undefined;
    const fields = c.changes.map((f) => f.field.split('.')[0]).filter((f, i, all) => all.indexOf(f) === i);
    if (c.action === 'create') put({ action: 'create', name: c.name, resource_type: type, changed_fields: fields, origin: 'config' });
    else if (c.action === 'update' && !neverProvisioned)
      put({ action: 'update', name: c.name, resource_type: type, changed_fields: c.patchFields, origin: 'config' });
    else if (c.action === 'replace' || c.action === 'delete') {
      // Never provisioned: nothing to deprovision, the pending create just goes.
      if (neverProvisioned) expected.delete(changeKey('create', c.name));
      else put({ action: 'delete', name: c.name, resource_type: type, changed_fields: [], origin: 'config' });
      if (c.action === 'replace') put({ action: 'create', name: c.name, resource_type: type, changed_fields: fields, origin: 'config' });
    }
  }
  return [...expected.values()].sort((a, b) => a.name.localeCompare(b.name) || a.action.localeCompare(b.action));
}

/**
 * The provisioning preview of each project whose provisioned resources the plan changes, or
 * that are not provisioned and healthy (pending, failed). A project that does not exist yet has
 * no platform plan: only the config's creates.
 */
export async function previewProvisioning(
  client: DataPlatformClient,
  plan: Plan,
  state: LiveState,
  signal?: AbortSignal,
): Promise<ProjectProvisioning[]> {
  const out: ProjectProvisioning[] = [];
  for (const [project, changes] of provisionedChanges(plan)) {
    // Nothing to change and everything provisioned (healthy): no plan to ask for. The controller
    // previews at every interval, and each platform plan is a request that is audited.
    if (changes.every((c) => c.action === 'no-op' && (c.health?.health ?? 'healthy') === 'healthy')) continue;
    const descriptor = (changes[0].doc?.descriptor ?? changes[0].live?.descriptor)!;
    const projectId = state.projects.get(project)?.id;
    let current: ProvisioningChange[] = [];
    let note: string | undefined;
    if (projectId) {
      try {
        current =
          (
            await client.request<ProvisioningPlan>({
              method: 'POST',
              route: provisioningRoutes(descriptor).plan,
              params: { id: projectId },
              signal,
            })
          ).body.changes ?? [];
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 403)) throw err;
        note = `the platform's current ${descriptor.kind} plan is not readable with this credential (${err.serverMessage}): only this config's part is shown`;
      }
    }
    const expected = expectedChanges(current, changes);
    if (expected.length || note) out.push({ project, descriptor, expected, ...(note ? { note } : {}) });
  }
  return out;
}

/** Why the platform's plan is not the expected one: a change this preview did not show. */
export function unexpectedChange(expected: ExpectedProvisioning[], plan: Pick<ProvisioningPlan, 'changes'>): string | null {
  const known = new Set(expected.map((e) => changeKey(e.action, e.name)));
  const extra = (plan.changes ?? []).filter((c) => !known.has(changeKey(c.action!, c.name!)));
  if (!extra.length) return null;
  return `the platform's infrastructure plan has changes this apply did not show: ${extra.map((c) => `${c.action} ${c.name}`).join(', ')} (someone changed the project meanwhile); nothing provisioned: run dpctl plan and apply again`;
}

export interface ProvisioningOutcome {
  project: string;
  /** The applied plan's changes, or [] when the platform had nothing to do. */
  changes: ProvisioningChange[];
  run?: ProvisioningRun;
  /** Failed changes, with the platform's reason; or the refusal / timeout as one failure. */
  failures: { name: string; message: string }[];
}

export interface ProvisionAllOptions {
  projectIds: Map<string, string>;
  deadline: number;
  /** false: start the applies and return (dpctl apply --no-wait). */
  wait: boolean;
  signal?: AbortSignal;
  onProgress?: (line: string) => void;
  pollMs?: number;
}

/** Runs each previewed project's provisioning, one project after another (each is one platform apply). */
export async function provisionAll(
  client: DataPlatformClient,
  previews: ProjectProvisioning[],
  o: ProvisionAllOptions,
): Promise<ProvisioningOutcome[]> {
  const out: ProvisioningOutcome[] = [];
  for (const p of previews) {
    const projectId = o.projectIds.get(p.project);
    if (!projectId) continue;
    const outcome: ProvisioningOutcome = { project: p.project, changes: [], failures: [] };
    out.push(outcome);
    try {
      const done = new Set<string>();
      const result = await provisionProject(client, p.descriptor, projectId, {
        deadline: o.deadline,
        signal: o.signal,
        wait: o.wait,
        pollMs: o.pollMs,
        check: (plan) => unexpectedChange(p.expected, plan),
        onPlan: (plan) =>
          o.onProgress?.(`  ${p.project}: provisioning ${plan.changes!.map((c) => `${c.action} ${c.name}`).join(', ')} (${plan.plan_id})`),
        onRun: (run) => reportUnits(run, done, p.project, o.onProgress),
      });
      outcome.changes = result.plan.changes ?? [];
      outcome.run = result.run;
      if (result.run && o.wait) outcome.failures = failedChanges(result.run).map((f) => ({ name: f.name, message: f.error }));
    } catch (err) {
      if (err instanceof ProvisioningRefused || err instanceof ProvisioningTimeout)
        outcome.failures.push({ name: p.project, message: (err as Error).message });
      else throw err;
    }
  }
  return out;
}

/** One progress line per change as it ends. */
function reportUnits(run: ProvisioningRun, done: Set<string>, project: string, progress?: (line: string) => void): void {
  for (const c of run.changes ?? []) {
    if ((c.status !== 'completed' && c.status !== 'failed') || done.has(c.resource_id)) continue;
    done.add(c.resource_id);
    progress?.(
      c.status === 'completed'
        ? `  ${project}/${c.name}: ${c.action === 'delete' ? 'deprovisioned' : 'provisioned'}`
        : `  x ${project}/${c.name}: provisioning failed: ${c.error}`,
    );
  }
}
