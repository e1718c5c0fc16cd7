import type { DataPlatformClient } from '../../client/index.js';
import { DataSourceHandler } from '../data-source.js';
import { ListCache } from '../list-cache.js';
import { ProviderError, ResourceHandler } from '../resource.js';
import { dataSourceSpecs, resourceSpecs, type DataSourceSpec, type ResourceSpec } from '../schema.js';
import { decodeDynamic, isTfObject, type DynamicValue, type TfObject, type TfValue } from '../values.js';

/**
 * What the RPC handlers share for the life of a provider process (terraform-plugin-framework's
 * fwserver.Server): the handlers by type name, the client once ConfigureProvider made it, the
 * list cache, and the signal StopProvider aborts.
 */
export class ProviderContext {
  readonly specs: Map<string, ResourceSpec>;
  readonly dataSpecs: Map<string, DataSourceSpec>;
  // One cache per process: Terraform starts a provider process per command (see ListCache).
  readonly cache = new ListCache();
  /** StopProvider (Terraform's Ctrl-C) ends the waits for provisioning in flight. */
  readonly stopping = new AbortController();
  private readonly handlers: Map<string, ResourceHandler>;
  private readonly dataHandlers: Map<string, DataSourceHandler>;
  private client: DataPlatformClient | undefined;
  private clientError: unknown;

  constructor(readonly onStop: () => void) {
    const getClient = () => this.getClient();
    this.specs = resourceSpecs();
    this.handlers = new Map([...this.specs.values()].map((s) => [s.typeName, new ResourceHandler(s, getClient, this.cache)]));
    this.dataSpecs = dataSourceSpecs();
    this.dataHandlers = new Map([...this.dataSpecs.values()].map((s) => [s.typeName, new DataSourceHandler(s, getClient, this.cache)]));
  }

  /** The client ConfigureProvider made; else its error, which every later call repeats. */
  getClient(): DataPlatformClient {
    if (this.client) return this.client;
    throw this.clientError ?? new ProviderError('provider_unconfigured', 'provider is not configured');
  }

  /** ConfigureProvider's result: the client, or why there is none. */
  configured(result: { client: DataPlatformClient } | { error: unknown }): void {
    if ('client' in result) this.client = result.client;
    else this.clientError = result.error;
  }

  resource(typeName: string): ResourceHandler {
    const h = this.handlers.get(typeName);
    if (!h) throw new ProviderError('unknown_type', `unknown resource type ${typeName}`);
    return h;
  }

  dataSource(typeName: string): DataSourceHandler {
    const h = this.dataHandlers.get(typeName);
    if (!h) throw new ProviderError('unknown_type', `unknown data source ${typeName}`);
    return h;
  }
}

/** A DynamicValue that holds an object, else null (absent, null, or not an object). */
export function objectOf(v: DynamicValue | undefined): TfObject | null {
  const value = decodeDynamic(v);
  return isTfObject(value) ? value : null;
}

/** A string attribute that is set: not null, unknown, empty or blank. */
export const present = (v: TfValue | undefined) => (typeof v === 'string' && v.trim() !== '' ? v : undefined);
