import { Diagnostics, namedPath } from '../diagnostics.js';
import type { DynamicValue } from '../values.js';
import { objectOf, type ProviderContext } from './context.js';

/** ValidateDataResourceConfig: a data source's own rules (one owner of a view), each at its attribute. */
export function validateDataResourceConfig(ctx: ProviderContext, req: { type_name: string; config?: DynamicValue }) {
  const diagnostics = new Diagnostics();
  for (const p of ctx.dataSource(req.type_name).validate(objectOf(req.config)))
    diagnostics.addError(p.summary, '', namedPath([p.attribute]));
  return { diagnostics: diagnostics.toProto() };
}
