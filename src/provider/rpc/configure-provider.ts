import { apiKeyFromFile, ClientConfigError, DataPlatformClient, passwordFromEnv, type ClientConfig } from '../../client/index.js';
import { diagnose, Diagnostics } from '../diagnostics.js';
import type { DynamicValue, TfObject } from '../values.js';
import { objectOf, present, type ProviderContext } from './context.js';

const truthy = (v: string | undefined) => v !== undefined && /^(1|true|yes|on)$/i.test(v.trim());

/**
 * What to trust, as a whole from one place, as credentials are: `insecure = true` or a `ca_file` in
 * the block, else the environment's (where `insecure = false` in the block turns DATAPLATFORM_INSECURE
 * off). A block's `insecure = true` beside the DATAPLATFORM_CA_FILE the quickstarts export was refused
 * as "a CA or insecure, not both", naming neither.
 */
function providerTrust(c: TfObject, env: NodeJS.ProcessEnv): Pick<ClientConfig, 'caFile' | 'insecure'> {
  const blockCa = present(c.ca_file);
  if (c.insecure === true && blockCa) throw new ClientConfigError('give either ca_file or insecure = true in the provider block, not both');
  if (c.insecure === true) return { insecure: true };
  if (blockCa) return { caFile: blockCa };
  const caFile = present(env.DATAPLATFORM_CA_FILE);
  const insecure = c.insecure === false ? false : truthy(env.DATAPLATFORM_INSECURE);
  if (caFile && insecure)
    throw new ClientConfigError(
      'DATAPLATFORM_CA_FILE and DATAPLATFORM_INSECURE are both set: unset one, or say which in the provider block (ca_file, or insecure = true)',
    );
  return { caFile, insecure: insecure || undefined };
}

/**
 * Provider block attributes win over DATAPLATFORM_* variables. Credentials come as a whole
 * from one place: an api_key or email in the block, else the environment's; so does trust
 * (providerTrust). The environment's mounted secret files win over its variables, as for dpctl
 * (DATAPLATFORM_API_KEY_FILE, DATAPLATFORM_PASSWORD_FILE), so one set of variables serves both.
 */
export function providerClientConfig(config: TfObject | null, env: NodeJS.ProcessEnv = process.env): ClientConfig {
  const c = config ?? {};
  let apiKey: string | undefined;
  let email: string | undefined;
  let password: string | undefined;
  if (present(c.api_key)) apiKey = present(c.api_key);
  else if (present(c.email)) {
    email = present(c.email);
    password = present(c.password) ?? passwordFromEnv(env);
  } else {
    apiKey = apiKeyFromFile(env) ?? present(env.DATAPLATFORM_API_KEY);
    if (!apiKey) {
      email = present(env.DATAPLATFORM_EMAIL);
      password = present(c.password) ?? passwordFromEnv(env);
    }
  }
  const out: ClientConfig = {
    url: present(c.endpoint) ?? present(env.DATAPLATFORM_URL) ?? '',
    apiKey,
    email,
    password,
    ...providerTrust(c, env),
    userAgent: 'terraform-provider-dataplatform',
  };
  if (!out.url) throw new ClientConfigError('endpoint is not set (provider block or DATAPLATFORM_URL), e.g. https://acme.localhost:8443');
  return out;
}

/**
 * Whether the credentials work: one request any key or user may make (the first page of one
 * project: an API key sees its own), as the AWS provider's GetCallerIdentity at configure. Without
 * it a plan that only creates makes no call, and passed with a wrong key that the apply then
 * failed on; and each resource's read repeated the same 401.
 */
async function checkCredentials(client: DataPlatformClient, signal: AbortSignal): Promise<void> {
  await client.projects.list({ limit: 1, signal });
}

/** ConfigureProvider: the client, from the block and the environment, checked; its error is repeated by every later call. */
export async function configureProvider(ctx: ProviderContext, req: { config?: DynamicValue }) {
  const diagnostics = new Diagnostics();
  const config = objectOf(req.config);
  let client: DataPlatformClient;
  try {
    client = new DataPlatformClient(providerClientConfig(config));
  } catch (err) {
    ctx.configured({ error: err });
    diagnostics.addError('invalid provider configuration', err instanceof Error ? err.message : String(err));
    return { diagnostics: diagnostics.toProto() };
  }
  if (config?.skip_credentials_validation !== true) {
    try {
      await checkCredentials(client, ctx.stopping.signal);
    } catch (err) {
      ctx.configured({ error: err });
      const found = diagnose(err);
      const why =
        'The provider checks the service and its credentials when it starts (GET /projects?limit=1); skip_credentials_validation = true leaves the check out.';
      diagnostics.addError(found.summary, found.detail ? `${found.detail}\n\n${why}` : why);
      return { diagnostics: diagnostics.toProto() };
    }
  }
  ctx.configured({ client });
  return { diagnostics: diagnostics.toProto() };
}
