import { testConnectionOf } from '../client/index.js';
import { healthOf } from '../kinds/index.js';
import { error, warning, type Diagnostic } from './diagnostics.js';
import type { ResourceHandler } from './resource.js';
import { objectToApi, type ResourceSpec } from './schema.js';
import { RUN_SETUP_TESTS } from './settings.js';
import type { TfObject } from './values.js';

/** How a resource is named in a diagnostic: its type and identity (`dataplatform_connector "orders-db"`). */
function named(spec: ResourceSpec, api: Record<string, unknown>): string {
  const identity = api[spec.descriptor.identity] ?? api.id;
  return `${spec.typeName} ${JSON.stringify(String(identity))}`;
}

/**
 * With `run_setup_tests = true` (kinds with `x-test-action`), tests the connection the service
 * now has. A failed test is an error of the apply, but the resource exists, so the caller keeps
 * it in the state.
 */
export async function connectionTest(h: ResourceHandler, state: TfObject, signal?: AbortSignal): Promise<Diagnostic[]> {
  const d = h.spec.descriptor;
  if (!d.testAction) return [];
  if (state[RUN_SETUP_TESTS] !== true) return untested(h.spec, state);
  const projectId = d.scope === 'project' && typeof state.project_id === 'string' ? state.project_id : undefined;
  const result = await testConnectionOf(h.client(), d, { projectId }, state.id as string, { signal });
  if (result.success) return [];
  const api = objectToApi(h.spec.attrs, state);
  return [
    error(
      `${h.spec.typeName}: connection test failed: ${result.message}`,
      `run_setup_tests is true, and the platform's test of ${named(h.spec, api)} (${String(state.id)}) failed. The ${d.title.toLowerCase()} is saved as configured; fix its settings (or the source) and apply again, or set run_setup_tests = false to save it untested.`,
    ),
  ];
}

/**
 * Without run_setup_tests, a resource that has never run (its kind's initial state) is saved
 * untested: a warning says so, instead of an apply that reads as proof that it works.
 */
function untested(spec: ResourceSpec, state: TfObject): Diagnostic[] {
  const api = objectToApi(spec.attrs, state);
  if (!healthOf(spec.descriptor, api).neverRun) return [];
  return [
    warning(
      `${named(spec, api)} has never run: its connection is untested`,
      `Saved as configured, but nothing has shown that the ${spec.descriptor.title.toLowerCase()} works; its first run tries it. Set run_setup_tests = true (runSetupTests in cdktf) to have the apply test it, and fail while the settings (host, credentials) are wrong.`,
    ),
  ];
}

/** The plan's note that it updates a resource to test its connection again (see private-state.ts). */
export function retestWarning(spec: ResourceSpec, prior: TfObject): Diagnostic {
  return warning(
    `${named(spec, objectToApi(spec.attrs, prior))}: its last connection test failed`,
    'run_setup_tests is true, and the test failed when it was last applied: this plan updates it to test the connection again, and the apply fails until the test passes.',
  );
}

/**
 * The resource's health (the kind's `x-health` rule) as a diagnostic when it is not fine:
 * degraded is a warning (Terraform manages the configuration, not the runs that failed), or an
 * error with `degradedIsError` (a provisioned kind that should now be provisioned); progressing
 * is a warning only after an apply that waited for it.
 */
export function healthDiagnostics(
  spec: ResourceSpec,
  state: TfObject | null,
  o: { degradedIsError?: boolean; afterWait?: boolean } = {},
): Diagnostic[] {
  if (!state || !spec.descriptor.health) return [];
  const api = objectToApi(spec.attrs, state);
  const { health, reason } = healthOf(spec.descriptor, api);
  if (health === 'degraded') {
    const summary = `${named(spec, api)} is degraded: ${reason}`;
    if (o.degradedIsError) return [error(summary, `The platform did not provision it. Fix the cause and run terraform apply again.`)];
    const next = spec.descriptor.provisioning
      ? "The next apply runs the platform's plan and apply again for it (an in-place update, or a replace when Terraform holds it tainted)."
      : 'Its configuration is as Terraform declares it, so nothing is planned for it; look at its recent runs and errors on the platform.';
    return [warning(summary, `The platform reports this ${spec.descriptor.title.toLowerCase()} as not working. ${next}`)];
  }
  if (health === 'progressing' && o.afterWait)
    return [warning(`${named(spec, api)} is still in progress: ${reason}`, 'The platform has not finished with it yet.')];
  return [];
}
