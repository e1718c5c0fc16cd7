import { retestWarning } from '../checks.js';
import { namedPath } from '../diagnostics.js';
import { decodePrivate } from '../private-state.js';
import { RUN_SETUP_TESTS } from '../settings.js';
import { encodeDynamic, type DynamicValue } from '../values.js';
import { objectOf, type ProviderContext } from './context.js';

export interface PlanResourceChangeRequest {
  type_name: string;
  prior_state?: DynamicValue;
  proposed_new_state?: DynamicValue;
  config?: DynamicValue;
  prior_private?: unknown;
}

/** PlanResourceChange: the planned state, and the attributes whose change needs a replacement. */
export function planResourceChange(ctx: ProviderContext, req: PlanResourceChangeRequest) {
  const h = ctx.resource(req.type_name);
  const prior = objectOf(req.prior_state);
  const config = objectOf(req.config);
  // The last test failed and the configuration still asks for one: plan an update, which tests again.
  const retest = prior !== null && config?.[RUN_SETUP_TESTS] === true && !!decodePrivate(req.prior_private).setupTestFailed;
  const { planned, replace } = h.plan(prior, objectOf(req.proposed_new_state), config, { retest });
  return {
    planned_state: encodeDynamic(planned),
    requires_replace: replace.map(namedPath),
    planned_private: req.prior_private,
    diagnostics: retest ? [retestWarning(h.spec, prior)] : [],
  };
}
