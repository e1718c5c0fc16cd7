import type { Command } from 'commander';
import type { ClientConfig, DataPlatformClient } from './index.js';

/**
 * Connection options of the commands that talk to the API (dpctl's and the controller's): the
 * flags, and the client they make. Only types are imported statically: the client loads when a
 * command runs, so `dpctl --help` starts without it.
 */

/** Target and credentials as flags; the DATAPLATFORM_* variables fill in the rest. */
export interface ConnectionOpts {
  url?: string;
  apiKey?: string;
  caFile?: string;
  insecure?: boolean;
}

/** Target and credential options (no config path). */
export function withConnection(cmd: Command): Command {
  return cmd
    .option('--url <url>', 'API URL, e.g. https://acme.localhost:8443 (default DATAPLATFORM_URL)')
    .option('--api-key <key>', 'API key (default DATAPLATFORM_API_KEY; or DATAPLATFORM_EMAIL + DATAPLATFORM_PASSWORD)')
    .option('--ca-file <file>', 'CA to trust (default DATAPLATFORM_CA_FILE)')
    .option('--insecure', 'skip TLS certificate verification (DATAPLATFORM_INSECURE=1)');
}

/** A client from the flags over the environment: a flag replaces the credential or trust setting it competes with. */
export async function makeClient(opts: ConnectionOpts, extra: Partial<ClientConfig> = {}): Promise<DataPlatformClient> {
  const { DataPlatformClient, clientConfigFromEnv } = await import('./index.js');
  const overrides: Partial<ClientConfig> = { ...extra };
  if (opts.url) overrides.url = opts.url;
  if (opts.apiKey) Object.assign(overrides, { apiKey: opts.apiKey, email: undefined, password: undefined });
  if (opts.caFile) Object.assign(overrides, { caFile: opts.caFile, insecure: undefined });
  if (opts.insecure) Object.assign(overrides, { insecure: true, caFile: undefined });
  return new DataPlatformClient(clientConfigFromEnv({ ...process.env, ...(opts.url ? { DATAPLATFORM_URL: opts.url } : {}) }, overrides));
}

/** `--concurrency` as a number: an integer from 1 to 64. */
export function parseConcurrency(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 64) throw new Error(`--concurrency must be an integer from 1 to 64, got ${value}`);
  return n;
}
