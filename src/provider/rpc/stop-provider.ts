import { ProviderError } from '../resource.js';
import type { ProviderContext } from './context.js';

/** StopProvider (Terraform's Ctrl-C): ends the waits in flight. */
export function stopProvider(ctx: ProviderContext) {
  ctx.stopping.abort(new ProviderError('stopped', 'Terraform stopped the provider'));
  ctx.onStop();
  return { Error: '' };
}
