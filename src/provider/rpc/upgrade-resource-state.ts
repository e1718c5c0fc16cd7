import { encodeDynamic } from '../values.js';
import type { ProviderContext } from './context.js';

/** UpgradeResourceState: the stored state (JSON) in the current schema's shape. */
export function upgradeResourceState(ctx: ProviderContext, req: { type_name: string; raw_state?: { json?: Uint8Array } }) {
  const h = ctx.resource(req.type_name);
  const json = req.raw_state?.json?.length ? JSON.parse(Buffer.from(req.raw_state.json).toString('utf8')) : null;
  return { upgraded_state: encodeDynamic(h.upgrade(json)), diagnostics: [] };
}
