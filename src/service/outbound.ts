import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { Agent } from 'undici';

/**
 * TLS from the service to the outside (notification deliveries over HTTPS and SMTP, identity providers): the
 * system CAs plus `--outbound-ca-file` and any CA a resource brings (an SSO provider's
 * `ca_certificate`), so a receiver behind a private CA works without touching the process-wide
 * trust store. One agent per distinct set of extra CAs, kept for the life of the process.
 */
const agents = new Map<string, Agent>();

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

/** The agent trusting these extra CAs (PEM texts and the `--outbound-ca-file`); undefined: the default one. */
export function outboundAgent(options: ExtraCas): Agent | undefined {
  const pems = extraPems(options);
  if (!pems.length) return undefined;
  const key = pems.join('\n');
  let agent = agents.get(key);
  if (!agent) agents.set(key, (agent = new Agent({ connect: { ca: [...rootCertificates, ...pems] } })));
  return agent;
}
