import { namedPath } from '../diagnostics.js';
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
  const { planned, replace } = h.plan(objectOf(req.prior_state), objectOf(req.proposed_new_state), objectOf(req.config));
  return {
    planned_state: encodeDynamic(planned),
    requires_replace: replace.map(namedPath),
    planned_private: req.prior_private,
    diagnostics: [],
  };
}
