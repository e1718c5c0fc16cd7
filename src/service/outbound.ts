import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { Agent, buildConnector } from 'undici';
import type { EgressPolicy } from './egress.js';

/**
 * TLS from the service to the outside (notification deliveries over HTTPS and SMTP, identity providers): the
 * system CAs plus `--outbound-ca-file` and any CA a resource brings (an SSO provider's
 * `ca_certificate`), so a receiver behind a private CA works without touching the process-wide
 * trust store. Every agent connects through the service's egress policy (egress.ts). One agent
 * per policy and distinct set of extra CAs, the MAX_AGENTS used last kept per policy: a tenant
 * admin can give an SSO provider a new CA as often as they like, and each one kept forever was
 * memory that grew without bound.
 */
const agents = new WeakMap<EgressPolicy, Map<string, Agent>>();

/**
 * Agents kept per policy (least recently used dropped first). A dropped agent is not closed: a
 * request that holds it (an SSO sign-in between its discovery and token calls) finishes on it,
 * and its idle sockets close on their keep-alive timeout, after which it is collected.
 */
export const MAX_AGENTS = 100;

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
  if (agent)
    byCas.delete(key); // re-inserted below: a Map keeps insertion order, so the first key is the least recently used
  else agent = new Agent({ connect: egressConnector(egress, pems.length ? [...rootCertificates, ...pems] : undefined) });
  byCas.set(key, agent);
  if (byCas.size > MAX_AGENTS) byCas.delete(byCas.keys().next().value!);
  return agent;
}
