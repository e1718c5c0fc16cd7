import { providerSchemaMessage, schemaMessage, type DataSourceSpec, type ResourceSpec } from '../schema.js';
import { SERVER_CAPABILITIES } from './get-metadata.js';

/** GetProviderSchema: the provider block's, every resource's and data source's schema (an answer of the build). */
export function getProviderSchema(specs: Map<string, ResourceSpec>, dataSpecs: Map<string, DataSourceSpec>) {
  return {
    provider: providerSchemaMessage(),
    resource_schemas: Object.fromEntries([...specs.values()].map((s) => [s.typeName, schemaMessage(s)])),
    data_source_schemas: Object.fromEntries([...dataSpecs.values()].map((s) => [s.typeName, schemaMessage(s)])),
    server_capabilities: SERVER_CAPABILITIES,
  };
}
