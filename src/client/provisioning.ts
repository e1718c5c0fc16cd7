import type { KindDescriptor } from '../kinds/index.js';
import type { InfrastructurePlan, Run } from '../kinds/generated/kinds.js';
import type { DataPlatformClient } from './client.js';
import { ApiError, DataPlatformError } from './errors.js';
import { kindRoutes } from './resources.js';
import { sleep } from './rate-gate.js';

/**
 * Provisioning of a kind with `x-provisioning` (infrastructure resources): the platform plans a
 * whole project at once and applies a plan by its id, one apply per project at a time. This is
 * the one loop dpctl and the Terraform provider share: plan, let the caller check the plan,
 * apply exactly that plan_id, and follow the apply's run to its end. Another apply running, or
 * a plan gone stale between plan and apply (409), means: wait a little, plan again, check again.
 */

export type ProvisioningPlan = InfrastructurePlan;
export type ProvisioningRun = Run;
export type ProvisioningChange = NonNullable<ProvisioningPlan['changes']>[number];

export interface ProvisionOptions {
  signal?: AbortSignal;
  /** Epoch ms after which waiting stops with a ProvisioningTimeout. */
  deadline: number;
  /**
   * Looks at each plan before it is applied: a reason to refuse it (nothing is applied, a
   * ProvisioningRefused is thrown), or null to go on. An empty plan is never applied.
   */
  check?: (plan: ProvisioningPlan) => string | null;
  /** Called with each plan that will be applied, then with the run at each poll. */
  onPlan?: (plan: ProvisioningPlan) => void;
  onRun?: (run: ProvisioningRun) => void;
  /** false: return once the apply started (its run as the apply answered it). Default true. */
  wait?: boolean;
  /** First poll interval (doubles up to 8x); default 500 ms. */
  pollMs?: number;
}

export interface ProvisionResult {
  /** The plan applied (or found empty). */
  plan: ProvisioningPlan;
  /** The apply's run once it ended (just started, with wait: false); undefined when the plan was empty. */
  run?: ProvisioningRun;
}

export class ProvisioningTimeout extends DataPlatformError {}
export class ProvisioningRefused extends DataPlatformError {}

/** Routes of a provisioned kind's plan, apply and runs, from its descriptor. */
export function provisioningRoutes(d: KindDescriptor) {
  if (!d.provisioning) throw new DataPlatformError(`kind ${d.kind} is not provisioned (no x-provisioning)`);
  const { collection } = kindRoutes(d);
  return {
    plan: `${collection}/${d.provisioning.plan}`,
    apply: `${collection}/${d.provisioning.apply}`,
    run: `${collection}/${d.provisioning.runs}/{runId}`,
  };
}

/** Plans the project, applies that plan when it has changes, and waits for the apply to end. */
export async function provisionProject(
  client: DataPlatformClient,
  d: KindDescriptor,
  projectId: string,
  o: ProvisionOptions,
): Promise<ProvisionResult> {
  const routes = provisioningRoutes(d);
  const params = { id: projectId };
  const base = o.pollMs ?? 500;
  let wait = base;
  for (;;) {
    const plan = (await client.request<ProvisioningPlan>({ method: 'POST', route: routes.plan, params, signal: o.signal })).body;
    if (!plan.changes?.length) return { plan };
    const refusal = o.check?.(plan);
    if (refusal) throw new ProvisioningRefused(refusal);
    let runId: string;
    try {
      runId = (
        await client.request<{ run_id: string }>({
          method: 'POST',
          route: routes.apply,
          params,
          body: { plan_id: plan.plan_id },
          signal: o.signal,
        })
      ).body.run_id;
    } catch (err) {
      // Another apply runs, or the plan changed since: wait, then plan (and check) again.
      if (!(err instanceof ApiError && err.status === 409)) throw err;
      if (Date.now() + wait > o.deadline)
        throw new ProvisioningTimeout(`gave up waiting for another infrastructure apply in the project to end: ${err.serverMessage}`);
      await sleep(wait, o.signal);
      wait = Math.min(wait * 2, base * 8);
      continue;
    }
    o.onPlan?.(plan);
    if (o.wait === false)
      return {
        plan,
        run: (await client.request<ProvisioningRun>({ method: 'GET', route: routes.run, params: { ...params, runId }, signal: o.signal }))
          .body,
      };
    return { plan, run: await followRun(client, routes.run, { ...params, runId }, o) };
  }
}

/** Polls an apply's run until it is no longer running (or the deadline passes). */
async function followRun(
  client: DataPlatformClient,
  route: string,
  params: Record<string, string>,
  o: ProvisionOptions,
): Promise<ProvisioningRun> {
  const base = o.pollMs ?? 500;
  let wait = base;
  for (;;) {
    const run = (await client.request<ProvisioningRun>({ method: 'GET', route, params, signal: o.signal })).body;
    o.onRun?.(run);
    if (run.status !== 'running' && run.status !== 'queued') return run;
    if (Date.now() + wait > o.deadline) throw new ProvisioningTimeout(`infrastructure apply ${run.id} still running at the deadline`);
    await sleep(wait, o.signal);
    wait = Math.min(wait * 2, base * 8);
  }
}

/** The changes of an ended apply run that failed, with the platform's reason. */
export function failedChanges(run: ProvisioningRun): { name: string; resource_id: string; action: string; error: string }[] {
  return (run.changes ?? [])
    .filter((c) => c.status === 'failed' || (run.status === 'failed' && c.status !== 'completed'))
    .map((c) => ({ name: c.name, resource_id: c.resource_id, action: c.action, error: c.error ?? run.error ?? `${c.status}` }));
}
