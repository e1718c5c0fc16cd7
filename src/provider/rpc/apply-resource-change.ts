import { diagnoseAll } from '../diagnostics.js';
import { applyChange } from '../lifecycle.js';
import { ProviderError } from '../resource.js';
import { encodePrivate } from '../private-state.js';
import { encodeDynamic, type DynamicValue } from '../values.js';
import { objectOf, type ProviderContext } from './context.js';
import { log } from './unary.js';

export interface ApplyResourceChangeRequest {
  type_name: string;
  prior_state?: DynamicValue;
  planned_state?: DynamicValue;
  config?: DynamicValue;
  planned_private?: unknown;
}

/**
 * ApplyResourceChange: the change made (see lifecycle.ts). On failure the state is what exists
 * now (the error's, or the prior one), so Terraform keeps track of a resource that was created.
 */
export async function applyResourceChange(ctx: ProviderContext, req: ApplyResourceChangeRequest) {
  const h = ctx.resource(req.type_name);
  const prior = objectOf(req.prior_state);
  const planned = objectOf(req.planned_state);
  try {
    const { state, diagnostics, setupTestFailed } = await applyChange(h, prior, planned, objectOf(req.config), ctx.stopping.signal);
    return { new_state: encodeDynamic(state), private: encodePrivate({ ...(setupTestFailed && { setupTestFailed: true }) }), diagnostics };
  } catch (err) {
    log(`ApplyResourceChange ${req.type_name} failed: ${err instanceof Error ? err.message : String(err)}`);
    const state = err instanceof ProviderError && err.newState !== undefined ? err.newState : prior;
    // The service's field errors point at the attributes, so Terraform shows the config line.
    // A create refused because the name is taken: the hint names the import that takes it over.
    const target = prior === null ? h.importId(planned) : undefined;
    const importAs = target === undefined ? undefined : { typeName: req.type_name, id: target };
    return { new_state: encodeDynamic(state), diagnostics: diagnoseAll(err, h.spec.attrs, `${req.type_name}: `, importAs) };
  }
}
