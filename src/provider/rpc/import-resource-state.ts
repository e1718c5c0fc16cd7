import { encodeDynamic } from '../values.js';
import type { ProviderContext } from './context.js';

/** ImportResourceState: the state of an existing resource, by its import id. */
export async function importResourceState(ctx: ProviderContext, req: { type_name: string; id: string }) {
  const state = await ctx.resource(req.type_name).import(req.id);
  return { imported_resources: [{ type_name: req.type_name, state: encodeDynamic(state) }], diagnostics: [] };
}
