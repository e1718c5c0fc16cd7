import type { DataSourceSpec, ResourceSpec } from '../schema.js';

/** What the provider supports beyond the protocol's minimum (both schema answers carry it). */
export const SERVER_CAPABILITIES = {
  plan_destroy: false,
  // Stays false: every start-up is asked for the schema, which is served from the build's
  // encoding and starts loading the implementation for what follows.
  get_provider_schema_optional: false,
};

/** GetMetadata: the type names of the resources and data sources (an answer of the build, see static-responses.ts). */
export function getMetadata(specs: Map<string, ResourceSpec>, dataSpecs: Map<string, DataSourceSpec>) {
  return {
    server_capabilities: SERVER_CAPABILITIES,
    resources: [...specs.keys()].map((type_name) => ({ type_name })),
    data_sources: [...dataSpecs.keys()].map((type_name) => ({ type_name })),
  };
}
