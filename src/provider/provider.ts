// The provider's RPC handlers: loaded after the handshake (see server.ts), so that the heavy
// modules they need (client, kinds, schemas, ajv) do not delay Terraform's start of the plugin.
// One module per RPC under rpc/ (as terraform-plugin-framework's fwserver/server_<rpc>.go).
import { applyResourceChange } from './rpc/apply-resource-change.js';
import { configureProvider } from './rpc/configure-provider.js';
import { ProviderContext } from './rpc/context.js';
import { getMetadata } from './rpc/get-metadata.js';
import { getProviderSchema } from './rpc/get-provider-schema.js';
import { importResourceState } from './rpc/import-resource-state.js';
import { planResourceChange } from './rpc/plan-resource-change.js';
import { readDataSource } from './rpc/read-data-source.js';
import { readResource } from './rpc/read-resource.js';
import { stopProvider } from './rpc/stop-provider.js';
import { unary } from './rpc/unary.js';
import { upgradeResourceState } from './rpc/upgrade-resource-state.js';
import { validateDataResourceConfig } from './rpc/validate-data-resource-config.js';
import { validateProviderConfig } from './rpc/validate-provider-config.js';
import { validateResourceConfig } from './rpc/validate-resource-config.js';
import { dataSourceSpecs, resourceSpecs } from './schema.js';
import type { StaticMethod } from './static-responses.js';

export { providerClientConfig } from './rpc/configure-provider.js';
export { providerConfigConflicts } from './rpc/validate-provider-config.js';

/**
 * The answers that depend only on the kinds; `npm run build` encodes them into
 * dist/provider/static-responses.json (see static-responses.ts) so start-ups skip this.
 */
export function staticResponses(specs = resourceSpecs(), dataSpecs = dataSourceSpecs()): Record<StaticMethod, Record<string, unknown>> {
  return { GetMetadata: getMetadata(specs, dataSpecs), GetProviderSchema: getProviderSchema(specs, dataSpecs) };
}

/** The tfplugin6.Provider service's handlers, by RPC name. */
export function providerImplementation(onStop: () => void) {
  const ctx = new ProviderContext(onStop);
  const canned = staticResponses(ctx.specs, ctx.dataSpecs);
  return {
    GetMetadata: unary('GetMetadata', () => canned.GetMetadata),
    GetProviderSchema: unary('GetProviderSchema', () => canned.GetProviderSchema),
    ValidateProviderConfig: unary('ValidateProviderConfig', (req) => validateProviderConfig(req)),
    ValidateResourceConfig: unary('ValidateResourceConfig', (req) => validateResourceConfig(ctx, req)),
    ValidateDataResourceConfig: unary('ValidateDataResourceConfig', (req) => validateDataResourceConfig(ctx, req)),
    ConfigureProvider: unary('ConfigureProvider', (req) => configureProvider(ctx, req)),
    UpgradeResourceState: unary('UpgradeResourceState', (req) => upgradeResourceState(ctx, req)),
    ReadResource: unary('ReadResource', (req) => readResource(ctx, req)),
    PlanResourceChange: unary('PlanResourceChange', (req) => planResourceChange(ctx, req)),
    ApplyResourceChange: unary('ApplyResourceChange', (req) => applyResourceChange(ctx, req)),
    ImportResourceState: unary('ImportResourceState', (req) => importResourceState(ctx, req)),
    ReadDataSource: unary('ReadDataSource', (req) => readDataSource(ctx, req)),
    StopProvider: unary('StopProvider', () => stopProvider(ctx)),
  };
}
