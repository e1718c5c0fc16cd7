// The provider's RPC handlers: loaded after the handshake (see server.ts), so that the heavy
// modules they need (client, kinds, schemas, ajv) do not delay Terraform's start of the plugin.
import type * as grpc from '@grpc/grpc-js';
import { ClientConfigError, DataPlatformClient, type ClientConfig } from '../client/index.js';
import { DataSourceHandler } from './data-source.js';
import { attributePath, diagnose, diagnoseAll, error, fieldName, placeablePath, type Step } from './diagnostics.js';
import { applyChange, readResource } from './lifecycle.js';
import { ListCache } from './list-cache.js';
import { ProviderError, ResourceHandler, writeOnlyConflicts, writeOnlySet } from './resource.js';
import { dataSourceSpecs, providerSchemaMessage, resourceSpecs, schemaMessage } from './schema.js';
import { settingErrors } from './settings.js';
import type { StaticMethod } from './static-responses.js';
import { validateConfig } from './validate.js';
import { decodeDynamic, encodeDynamic, isTfObject, type DynamicValue, type TfObject, type TfValue } from './values.js';

const log = (msg: string) => process.stderr.write(`[dataplatform-provider] ${msg}\n`);

const present = (v: TfValue | undefined) => (typeof v === 'string' && v.trim() !== '' ? v : undefined);
const truthy = (v: string | undefined) => v !== undefined && /^(1|true|yes|on)$/i.test(v.trim());

/**
 * Provider block attributes win over DATAPLATFORM_* variables. Credentials come as a whole
 * from one place: an api_key or email in the block, else the environment's.
 */
export function providerClientConfig(config: TfObject | null, env: NodeJS.ProcessEnv = process.env): ClientConfig {
  const c = config ?? {};
  let apiKey: string | undefined;
  let email: string | undefined;
  let password: string | undefined;
  if (present(c.api_key)) apiKey = present(c.api_key);
  else if (present(c.email)) {
    email = present(c.email);
    password = present(c.password) ?? present(env.DATAPLATFORM_PASSWORD);
  } else if (present(env.DATAPLATFORM_API_KEY)) apiKey = present(env.DATAPLATFORM_API_KEY);
  else {
    email = present(env.DATAPLATFORM_EMAIL);
    password = present(c.password) ?? present(env.DATAPLATFORM_PASSWORD);
  }
  const out: ClientConfig = {
    url: present(c.endpoint) ?? present(env.DATAPLATFORM_URL) ?? '',
    apiKey,
    email,
    password,
    caFile: present(c.ca_file) ?? present(env.DATAPLATFORM_CA_FILE),
    insecure: (typeof c.insecure === 'boolean' ? c.insecure : truthy(env.DATAPLATFORM_INSECURE)) || undefined,
    userAgent: 'terraform-provider-dataplatform',
  };
  if (!out.url) throw new ClientConfigError('endpoint is not set (provider block or DATAPLATFORM_URL), e.g. https://acme.localhost:8443');
  return out;
}

/**
 * Settings in the provider block that contradict each other. The environment only fills what the
 * block leaves out, so a conflict between the block and a variable is not one; two credentials in
 * the block are a mistake Terraform should point at, not one to settle silently.
 */
export function providerConfigConflicts(config: TfObject | null): { attribute: string; summary: string; detail: string }[] {
  const c = config ?? {};
  const out: { attribute: string; summary: string; detail: string }[] = [];
  if (present(c.api_key)) {
    for (const name of ['email', 'password'] as const)
      if (present(c[name]))
        out.push({
          attribute: name,
          summary: `give either api_key or email and password, not both`,
          detail: `The provider block sets api_key and ${name}. Remove api_key to sign in with email and password, or remove ${name} to use the API key.`,
        });
  }
  if (c.insecure === true && present(c.ca_file))
    out.push({
      attribute: 'insecure',
      summary: 'give either ca_file or insecure = true, not both',
      detail: 'ca_file makes the provider trust that CA; insecure = true turns certificate checks off. Keep ca_file.',
    });
  return out;
}

// Messages are plain objects decoded by @grpc/proto-loader from the protocol's .proto files.
/* eslint-disable @typescript-eslint/no-explicit-any */
type Call = grpc.ServerUnaryCall<any, any>;
type Callback = grpc.sendUnaryData<any>;
/* eslint-enable @typescript-eslint/no-explicit-any */

/** Wraps a handler: exceptions become error diagnostics in the field the response uses. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
function unary(name: string, fn: (req: any) => Promise<Record<string, unknown>> | Record<string, unknown>) {
  return (call: Call, callback: Callback) => {
    Promise.resolve()
      .then(() => fn(call.request))
      .then(
        (res) => callback(null, res),
        (err) => {
          log(`${name} failed: ${err instanceof Error ? err.message : String(err)}`);
          callback(null, { diagnostics: [diagnose(err)] });
        },
      );
  };
}

/**
 * The answers that depend only on the kinds; `npm run build` encodes them into
 * dist/provider/static-responses.json (see static-responses.ts) so start-ups skip this.
 */
export function staticResponses(specs = resourceSpecs(), dataSpecs = dataSourceSpecs()): Record<StaticMethod, Record<string, unknown>> {
  // get_provider_schema_optional stays false: every start-up is asked for the schema, which is
  // served from the build's encoding and starts loading the implementation for what follows.
  const server_capabilities = { plan_destroy: false, get_provider_schema_optional: false };
  return {
    GetMetadata: {
      server_capabilities,
      resources: [...specs.keys()].map((type_name) => ({ type_name })),
      data_sources: [...dataSpecs.keys()].map((type_name) => ({ type_name })),
    },
    GetProviderSchema: {
      provider: providerSchemaMessage(),
      resource_schemas: Object.fromEntries([...specs.values()].map((s) => [s.typeName, schemaMessage(s)])),
      data_source_schemas: Object.fromEntries([...dataSpecs.values()].map((s) => [s.typeName, schemaMessage(s)])),
      server_capabilities,
    },
  };
}

export function providerImplementation(onStop: () => void) {
  const specs = resourceSpecs();
  let client: DataPlatformClient | undefined;
  let clientError: unknown;
  const getClient = () => {
    if (client) return client;
    throw clientError ?? new ProviderError('provider is not configured');
  };
  // One cache per process: Terraform starts a provider process per command (see ListCache).
  const cache = new ListCache();
  const handlers = new Map([...specs.values()].map((s) => [s.typeName, new ResourceHandler(s, getClient, cache)]));
  const handler = (typeName: string) => {
    const h = handlers.get(typeName);
    if (!h) throw new ProviderError(`unknown resource type ${typeName}`);
    return h;
  };
  const dataSpecs = dataSourceSpecs();
  const dataHandlers = new Map([...dataSpecs.values()].map((s) => [s.typeName, new DataSourceHandler(s, getClient, cache)]));
  const dataHandler = (typeName: string) => {
    const h = dataHandlers.get(typeName);
    if (!h) throw new ProviderError(`unknown data source ${typeName}`);
    return h;
  };
  const canned = staticResponses(specs, dataSpecs);
  // StopProvider (Terraform's Ctrl-C) ends the waits for provisioning in flight.
  const stopping = new AbortController();
  const obj = (v: DynamicValue | undefined): TfObject | null => {
    const value = decodeDynamic(v);
    return isTfObject(value) ? value : null;
  };

  return {
    GetMetadata: unary('GetMetadata', () => canned.GetMetadata),
    GetProviderSchema: unary('GetProviderSchema', () => canned.GetProviderSchema),
    ValidateProviderConfig: unary('ValidateProviderConfig', (req) => ({
      diagnostics: providerConfigConflicts(obj(req.config)).map((c) => ({
        ...error(c.summary, c.detail),
        attribute: { steps: [{ attribute_name: c.attribute }] },
      })),
    })),
    ValidateResourceConfig: unary('ValidateResourceConfig', (req) => {
      const h = handler(req.type_name);
      const config = obj(req.config);
      const conflicts = writeOnlyConflicts(h.spec.attrs, config);
      const diagnostics: Array<ReturnType<typeof error> & { attribute?: { steps: Step[] } }> = conflicts.map((path) => ({
        ...error(`${req.type_name}: give either ${path} or ${path}_wo, not both`),
        attribute: placeablePath(path.split('.').map((p) => (/^\d+$/.test(p) ? Number(p) : p))),
      }));
      // A Terraform without write-only support (before 1.11) would keep `_wo` values in the plan and the state.
      if (!req.client_capabilities?.write_only_attributes_allowed) {
        for (const path of writeOnlySet(h.spec.attrs, config)) {
          const name = fieldName(path);
          const plain = name.replace(/_wo$/, '');
          diagnostics.push({
            ...error(
              `${req.type_name}: ${name} is write-only, which needs Terraform 1.11 or later`,
              `This Terraform does not support write-only attributes (it did not announce write_only_attributes_allowed), so it would keep the value in the plan and the state. Upgrade to Terraform 1.11 or later, or set ${plain} instead of ${name} and ${name}_version.`,
            ),
            attribute: placeablePath(path),
          });
        }
      }
      // Settings live in blocks (`timeouts`), which Terraform can place down to the attribute.
      for (const e of settingErrors(config))
        diagnostics.push({
          ...error(`${req.type_name}: ${e.path.join('.')} ${e.message}`),
          attribute: { steps: e.path.map((attribute_name) => ({ attribute_name })) },
        });
      for (const e of validateConfig(h.spec, config)) {
        const attribute = attributePath(h.spec.attrs, e.field, true);
        diagnostics.push({ ...error(`${req.type_name}: ${e.field} ${e.message}`), ...(attribute ? { attribute } : {}) });
      }
      return { diagnostics };
    }),
    ValidateDataResourceConfig: unary('ValidateDataResourceConfig', (req) => {
      const h = dataHandler(req.type_name);
      return {
        diagnostics: h
          .validate(obj(req.config))
          .map((p) => ({ ...error(p.summary), attribute: { steps: [{ attribute_name: p.attribute }] } })),
      };
    }),
    ConfigureProvider: unary('ConfigureProvider', (req) => {
      try {
        client = new DataPlatformClient(providerClientConfig(obj(req.config)));
        return { diagnostics: [] };
      } catch (err) {
        clientError = err;
        return { diagnostics: [error('invalid provider configuration', err instanceof Error ? err.message : String(err))] };
      }
    }),
    UpgradeResourceState: unary('UpgradeResourceState', (req) => {
      const h = handler(req.type_name);
      const json = req.raw_state?.json?.length ? JSON.parse(Buffer.from(req.raw_state.json).toString('utf8')) : null;
      return { upgraded_state: encodeDynamic(h.upgrade(json)), diagnostics: [] };
    }),
    ReadResource: unary('ReadResource', async (req) => {
      const h = handler(req.type_name);
      const { state, diagnostics } = await readResource(h, obj(req.current_state));
      return { new_state: encodeDynamic(state), private: req.private, diagnostics };
    }),
    PlanResourceChange: unary('PlanResourceChange', (req) => {
      const h = handler(req.type_name);
      const { planned, replace } = h.plan(obj(req.prior_state), obj(req.proposed_new_state), obj(req.config));
      return {
        planned_state: encodeDynamic(planned),
        requires_replace: replace.map((path) => ({ steps: path.map((attribute_name) => ({ attribute_name })) })),
        planned_private: req.prior_private,
        diagnostics: [],
      };
    }),
    ApplyResourceChange: unary('ApplyResourceChange', async (req) => {
      const h = handler(req.type_name);
      const prior = obj(req.prior_state);
      try {
        const { state, diagnostics } = await applyChange(h, prior, obj(req.planned_state), obj(req.config), stopping.signal);
        return { new_state: encodeDynamic(state), private: req.planned_private, diagnostics };
      } catch (err) {
        log(`ApplyResourceChange ${req.type_name} failed: ${err instanceof Error ? err.message : String(err)}`);
        const state = err instanceof ProviderError && err.newState !== undefined ? err.newState : prior;
        // The service's field errors point at the attributes, so Terraform shows the config line.
        return { new_state: encodeDynamic(state), diagnostics: diagnoseAll(err, h.spec.attrs, `${req.type_name}: `) };
      }
    }),
    ImportResourceState: unary('ImportResourceState', async (req) => {
      const h = handler(req.type_name);
      const state = await h.import(req.id);
      return { imported_resources: [{ type_name: req.type_name, state: encodeDynamic(state) }], diagnostics: [] };
    }),
    ReadDataSource: unary('ReadDataSource', async (req) => {
      const h = dataHandler(req.type_name);
      const state = await h.read(obj(req.config) ?? {});
      return { state: encodeDynamic(state), diagnostics: [] };
    }),
    StopProvider: unary('StopProvider', () => {
      stopping.abort(new ProviderError('Terraform stopped the provider'));
      onStop();
      return { Error: '' };
    }),
  };
}
