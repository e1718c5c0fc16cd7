import { encodeDynamic, type DynamicValue } from '../values.js';
import { objectOf, type ProviderContext } from './context.js';

/** ReadDataSource: the data source's state, read from the service. */
export async function readDataSource(ctx: ProviderContext, req: { type_name: string; config?: DynamicValue }) {
  const state = await ctx.dataSource(req.type_name).read(objectOf(req.config) ?? {});
  return { state: encodeDynamic(state), diagnostics: [] };
}
