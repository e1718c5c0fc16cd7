import type { Command } from 'commander';
import type { ClientConfig, ClientEvent, DataPlatformClient } from './index.js';

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

/**
 * An onEvent that says when calls wait for the rate limit, and why, once per pause of an endpoint:
 * a wait of up to a minute (a plan or apply of thousands of resources) printed nothing before.
 */
export function rateLimitNotices(say: (line: string) => void): (e: ClientEvent) => void {
  const saidUntil = new Map<string, number>();
  return (e) => {
    if (e.type !== 'rate_limited' && e.type !== 'rate_limit_reserve') return;
    // Calls in flight report the same pause again, a few ms apart.
    if ((saidUntil.get(e.endpoint) ?? 0) >= e.until - 1_000) return;
    saidUntil.set(e.endpoint, e.until);
    const seconds = Math.max(1, Math.ceil((e.until - Date.now()) / 1000));
    say(
      e.type === 'rate_limited'
        ? `waiting ${seconds} s: the service's rate limit of ${e.endpoint} is spent for this minute (429, Retry-After)`
        : `waiting ${seconds} s for ${e.endpoint}: ${e.remaining} of its ${e.limit} calls a minute are left, kept for the tenant's other callers`,
    );
  };
}

/**
 * A client from the flags over the environment: a flag replaces the credential or trust setting it
 * competes with. Rate-limit waits are said on stderr unless `extra.onEvent` takes the events.
 */
export async function makeClient(opts: ConnectionOpts, extra: Partial<ClientConfig> = {}): Promise<DataPlatformClient> {
  const { DataPlatformClient, clientConfigFromEnv } = await import('./index.js');
  const overrides: Partial<ClientConfig> = { onEvent: rateLimitNotices((line) => process.stderr.write(`dpctl: ${line}\n`)), ...extra };
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
