import { readResource as refresh } from '../lifecycle.js';
import { encodeDynamic, type DynamicValue } from '../values.js';
import { objectOf, type ProviderContext } from './context.js';

/** ReadResource: the refreshed state (null when the resource is gone), with a warning when it is degraded. */
export async function readResource(ctx: ProviderContext, req: { type_name: string; current_state?: DynamicValue; private?: unknown }) {
  const h = ctx.resource(req.type_name);
  const { state, diagnostics } = await refresh(h, objectOf(req.current_state));
  return { new_state: encodeDynamic(state), private: req.private, diagnostics };
}
