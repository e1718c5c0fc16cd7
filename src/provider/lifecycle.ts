import { healthDiagnostics, connectionTest } from './checks.js';
import { diagnose, isError, type Diagnostic } from './diagnostics.js';
import { waitForProvisioning } from './provisioning.js';
import { ProviderError, type ResourceHandler } from './resource.js';
import { inconsistencies, type TfObject } from './values.js';

export interface Outcome {
  state: TfObject | null;
  diagnostics: Diagnostic[];
  /** run_setup_tests tested the connection, and the test failed (kept in the private state: the next plan tests again). */
  setupTestFailed?: boolean;
}

/**
 * ApplyResourceChange: the API call (ResourceHandler.apply; its errors are thrown), then what the
 * descriptor asks for once the resource exists: wait for provisioning (`x-provisioning`), test the
 * connection (`x-test-action` with run_setup_tests), report health (`x-health`). Those find
 * problems with a resource that exists, so they are diagnostics beside the new state, never a
 * lost state: after a failed create Terraform then records the resource as tainted.
 */
export async function applyChange(
  h: ResourceHandler,
  prior: TfObject | null,
  planned: TfObject | null,
  config: TfObject | null,
  signal?: AbortSignal,
): Promise<Outcome> {
  const d = h.spec.descriptor;
  if (planned === null) {
    await h.apply(prior, null);
    // With errors and a null state, Terraform keeps the prior object; its next refresh finds it gone.
    return { state: null, diagnostics: prior && d.provisioning ? await waitForProvisioning(h, prior, 'delete', signal) : [] };
  }
  let state = (await h.apply(prior, planned, config)) as TfObject;
  const diagnostics: Diagnostic[] = [];
  let setupTestFailed = false;
  try {
    if (d.provisioning) {
      diagnostics.push(...(await waitForProvisioning(h, state, prior ? 'update' : 'create', signal)));
      state = await readBack(h, planned, state);
    }
    const tested = await connectionTest(h, state, signal);
    setupTestFailed = tested.some(isError);
    diagnostics.push(...tested);
  } catch (err) {
    if (err instanceof ProviderError && err.newState) state = err.newState;
    diagnostics.push(diagnose(err));
  }
  // A provisioned kind that is still degraded after the wait did not get provisioned (someone
  // else's apply failed it): an error unless this apply's own failure already said so.
  if (!diagnostics.some(isError))
    diagnostics.push(...healthDiagnostics(h.spec, state, { degradedIsError: !!d.provisioning, afterWait: !!d.provisioning }));
  return { state, diagnostics, setupTestFailed };
}

/** The resource after provisioning changed its status, checked against the plan like any answer. */
async function readBack(h: ResourceHandler, planned: TfObject, state: TfObject): Promise<TfObject> {
  const fresh = await h.fetch(state);
  const problems = inconsistencies(planned, fresh);
  if (problems.length)
    throw new ProviderError(
      'plan_mismatch',
      `${h.spec.typeName}: the resource read back after provisioning does not match the plan`,
      problems.join('\n'),
      state,
    );
  return fresh;
}

/** ReadResource: the refreshed state, with a warning when the platform reports it degraded. */
export async function readResource(h: ResourceHandler, state: TfObject | null): Promise<Outcome> {
  const fresh = await h.read(state);
  return { state: fresh, diagnostics: healthDiagnostics(h.spec, fresh) };
}
