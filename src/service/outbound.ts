import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { Agent, buildConnector } from 'undici';
import type { EgressPolicy } from './egress.js';

/**
 * TLS from the service to the outside (notification deliveries over HTTPS and SMTP, identity providers): the
 * system CAs plus `--outbound-ca-file` and any CA a resource brings (an SSO provider's
 * `ca_certificate`), so a receiver behind a private CA works without touching the process-wide
 * trust store. Every agent connects through the service's egress policy (egress.ts). One agent
 * per policy and distinct set of extra CAs, kept as long as the policy.
 */
const agents = new WeakMap<EgressPolicy, Map<string, Agent>>();

interface ExtraCas {
  caFile?: string;
  caPems?: (string | undefined)[];
}

/** `--outbound-ca-file` is read once, like the agents built from it are kept: not on every delivery. */
const caFiles = new Map<string, string>();

function extraPems(options: ExtraCas): string[] {
  const pems = (options.caPems ?? []).filter((pem): pem is string => !!pem);
  if (options.caFile) {
    let pem = caFiles.get(options.caFile);
    if (pem === undefined) caFiles.set(options.caFile, (pem = readFileSync(options.caFile, 'utf8')));
    pems.push(pem);
  }
  return pems;
}

/** The CA list for a TLS connection trusting these extra CAs too; undefined: Node's default. */
export function outboundCas(options: ExtraCas): string[] | undefined {
  const pems = extraPems(options);
  return pems.length ? [...rootCertificates, ...pems] : undefined;
}

/**
 * undici's connector with the policy's `lookup` (host names: only permitted addresses are
 * connected to) and a check of literal IP hosts, which net connects to without any lookup.
 */
function egressConnector(egress: EgressPolicy, ca: string[] | undefined): buildConnector.connector {
  const connect = buildConnector({ ...(ca ? { ca } : {}), lookup: egress.lookup });
  return (options, callback) => {
    try {
      egress.checkLiteral(options.hostname);
    } catch (err) {
      return callback(err as Error, null);
    }
    return connect(options, callback);
  };
}

/** The agent for outbound HTTP(S) under this egress policy, trusting these extra CAs (PEM texts and the `--outbound-ca-file`). */
export function outboundAgent(egress: EgressPolicy, options: ExtraCas = {}): Agent {
  const pems = extraPems(options);
  const key = pems.join('\n');
  let byCas = agents.get(egress);
  if (!byCas) agents.set(egress, (byCas = new Map()));
  let agent = byCas.get(key);
  if (!agent)
    byCas.set(key, (agent = new Agent({ connect: egressConnector(egress, pems.length ? [...rootCertificates, ...pems] : undefined) })));
  return agent;
}
