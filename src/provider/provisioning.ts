import { failedChanges, provisionProject, ProvisioningTimeout, type ProvisioningRun } from '../client/index.js';
import { RUN_INTERRUPTED } from '../kinds/index.js';
import { diagnose, error, type Diagnostic } from './diagnostics.js';
import type { ResourceHandler } from './resource.js';
import { timeoutOf, type TimeoutOp } from './settings.js';
import type { TfObject } from './values.js';

/**
 * Waiting for a kind with `x-provisioning` (infrastructure resources): the API call only records
 * the desired resource; the platform provisions it when its project's infrastructure plan is
 * applied. So after each create, update and delete the provider runs that plan + apply (the
 * client's provisionProject, shared with dpctl) and waits for the apply's run, up to the
 * resource's `timeouts`.
 *
 * The apply is project-wide: resources Terraform creates in parallel each plan and apply, and
 * provisionProject waits out the 409s (another apply running, a plan gone stale) and plans again.
 * By then someone else's apply may have provisioned this resource, so its change is not in the
 * run (or there is no run at all): the caller reads the resource back and judges its health.
 */

const log = (msg: string) => process.stderr.write(`[dataplatform-provider] ${msg}\n`);

/** Plans and applies the resource's project, waits, and returns this resource's failures as diagnostics. */
export async function waitForProvisioning(h: ResourceHandler, state: TfObject, op: TimeoutOp, signal?: AbortSignal): Promise<Diagnostic[]> {
  const d = h.spec.descriptor;
  const projectId = typeof state.project_id === 'string' ? state.project_id : null;
  if (!projectId)
    return [
      error(
        `${h.spec.typeName}: cannot provision without a project_id`,
        `kind ${d.kind} has x-provisioning, which plans and applies a project.`,
      ),
    ];
  const timeout = timeoutOf(state, op);
  let started: string | undefined;
  try {
    const { run } = await provisionProject(h.client(), d, projectId, {
      deadline: Date.now() + timeout.ms,
      signal,
      onRun: (r) => {
        started = r.id;
        log(`${h.spec.typeName} ${String(state.id)}: infrastructure apply ${r.id} ${r.status}`);
      },
    });
    return run ? failuresOf(h, state, op, run) : [];
  } catch (err) {
    if (err instanceof ProvisioningTimeout) return [timedOut(h, state, op, err.message)];
    if (signal?.aborted) return [stoppedWaiting(h, op, started)];
    return [diagnose(err)];
  }
}

/**
 * Terraform stopped the provider (Ctrl-C) while it waited. What goes on depends on whether a
 * platform apply had started for this change (it said "the platform goes on" of resources that were
 * only pending, with no apply at all), and a create that returns an error is tainted by Terraform,
 * so the next apply would replace a resource that may be fine: untaint keeps it.
 */
export function stoppedWaiting(h: ResourceHandler, op: TimeoutOp, runId: string | undefined): Diagnostic {
  const where = runId
    ? `The platform goes on with its infrastructure apply (run ${runId}); run terraform apply again to wait for it.`
    : 'No platform apply had started for this change: it stays pending on the platform, and the next terraform apply provisions it.';
  const taint =
    op === 'create'
      ? ' Terraform marks a resource whose create was stopped as tainted, so that apply would replace it; run terraform untaint <address> first to keep it.'
      : '';
  return error(`${h.spec.typeName}: stopped while waiting for provisioning`, `Terraform stopped the provider. ${where}${taint}`);
}

const AFTER_FAILURE: Record<TimeoutOp, string> = {
  create:
    'The resource exists in the API (status failed), so Terraform keeps it in the state, marked tainted: fix the configuration (a region the provider knows, for example) and run terraform apply again, which replaces it.',
  update:
    'The state holds the new configuration; the platform proposes the change again at its next plan, and until it is provisioned every terraform plan shows this resource as an update. Fix the cause and run terraform apply again.',
  delete: 'The resource is already deleted from the API; the platform deprovisions it at its next infrastructure apply.',
};

/** After an apply a service restart cut short: the configuration is fine (it told the user to fix a region). */
const AFTER_INTERRUPTION: Record<TimeoutOp, string> = {
  create:
    'The platform restarted during its apply: nothing is wrong with the configuration. Terraform keeps the resource in the state, marked tainted; run terraform untaint <address> and then terraform apply to provision it in place (without untaint the apply replaces it).',
  update: 'The platform restarted during its apply: nothing is wrong with the configuration. Run terraform apply again.',
  delete: AFTER_FAILURE.delete,
};

/** This resource's changes that failed in the apply's run, with the platform's message as the summary. */
export function failuresOf(h: ResourceHandler, state: TfObject, op: TimeoutOp, run: ProvisioningRun): Diagnostic[] {
  return failedChanges(run)
    .filter((c) => c.resource_id === state.id)
    .map((c) =>
      error(
        `${h.spec.typeName}: provisioning failed: ${c.error}`,
        `The platform's infrastructure apply (run ${run.id}) could not ${c.action} "${c.name}" (${c.resource_id}). ${(String(c.error).includes(RUN_INTERRUPTED) ? AFTER_INTERRUPTION : AFTER_FAILURE)[op]}`,
      ),
    );
}

const AFTER_TIMEOUT: Record<TimeoutOp, string> = {
  create:
    'Terraform keeps the resource in the state, marked tainted, so the next apply replaces it; once the platform has provisioned it, terraform untaint keeps it instead.',
  update: 'The state holds the new configuration; run terraform apply again to wait for the platform again.',
  delete: 'The resource is already deleted from the API; the next terraform plan drops it from the state.',
};

function timedOut(h: ResourceHandler, state: TfObject, op: TimeoutOp, message: string): Diagnostic {
  const { text, configured } = timeoutOf(state, op);
  const source = configured ? `timeouts.${op}` : `the default; set timeouts { ${op} = "..." } for another`;
  return error(
    `${h.spec.typeName}: provisioning did not finish within ${text}`,
    `Waited ${text} (${source}) for the project's infrastructure apply: ${message}. The platform goes on with it. ${AFTER_TIMEOUT[op]}`,
  );
}
