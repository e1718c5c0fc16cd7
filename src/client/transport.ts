import { lookup as dnsLookup } from 'node:dns';
import { readFileSync } from 'node:fs';
import type { LookupFunction } from 'node:net';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import { UndiciAgent, type Agent } from './undici.js';
import { ClientConfigError, NetworkError } from './errors.js';

/**
 * `localhost` and `<anything>.localhost` resolve to loopback inside the client (RFC 6761, as
 * browsers and curl do), so `https://acme.localhost:8443` works without an /etc/hosts entry.
 * Every other name goes to the system resolver.
 */
export const localhostLookup: LookupFunction = (hostname, options, callback) => {
  const host = hostname.toLowerCase().replace(/\.$/, '');
  if (host === 'localhost' || host.endsWith('.localhost')) {
    const v6 = options.family === 6 || options.family === 'IPv6';
    const address = v6 ? '::1' : '127.0.0.1';
    const family = v6 ? 6 : 4;
    if (options.all) {
      (callback as unknown as (err: null, addresses: { address: string; family: number }[]) => void)(null, [{ address, family }]);
    } else {
      (callback as (err: null, address: string, family: number) => void)(null, address, family);
    }
    return;
  }
  dnsLookup(hostname, options, callback as never);
};

export interface TransportOptions {
  caFile?: string;
  ca?: string | Buffer;
  insecure?: boolean;
  timeoutMs?: number;
  connections?: number;
}

/** TLS settings of one client, shared by its HTTP agent and its WebSocket streams. */
export interface TlsConnectOptions {
  lookup: LookupFunction;
  /**
   * One TLS context for every connection of the client: the system's roots plus the configured
   * CA, if any. Without it, every connection would build its own from the ~140 root
   * certificates (parsing each, 20-130 ms a connection).
   */
  secureContext: SecureContext;
  rejectUnauthorized?: false;
}

/**
 * The system's roots plus `ca`. The default context shares the process's root store; the first
 * CA added to it gives the context a copy of that store (roots, NODE_EXTRA_CA_CERTS) with the CA
 * in it, in about 1 ms, where `ca: [...rootCertificates, ca]` parses every root again.
 */
export function trustingContext(ca?: string | Buffer): SecureContext {
  if (ca === undefined) return createSecureContext();
  const context = createSecureContext();
  const native = (context as SecureContext & { context?: { addCACert?: (pem: string | Buffer) => void } }).context;
  if (typeof native?.addCACert === 'function') {
    native.addCACert(ca);
    return context;
  }
  // A runtime without the native method: the documented way (slower, same trust).
  return createSecureContext({ ca: [...rootCertificates, ca] });
}

/** Our lookup, one TLS context (the CA added to the system's roots) or no verification. */
export function tlsConnectOptions(options: TransportOptions): TlsConnectOptions {
  let ca: string | Buffer | undefined;
  if (options.caFile) {
    try {
      ca = readFileSync(options.caFile);
    } catch (err) {
      throw new ClientConfigError(`cannot read the CA file ${options.caFile}: ${(err as Error).message}`);
    }
  } else if (options.ca) {
    ca = options.ca;
  }
  return {
    lookup: localhostLookup,
    secureContext: trustingContext(ca),
    ...(options.insecure ? { rejectUnauthorized: false as const } : {}),
  };
}

/** The undici Agent of one client. */
export function createAgent(options: TransportOptions, tls: TlsConnectOptions = tlsConnectOptions(options)): Agent {
  const timeout = options.timeoutMs ?? 60_000;
  return new UndiciAgent({
    connect: tls,
    connections: options.connections ?? 16,
    headersTimeout: timeout,
    bodyTimeout: timeout,
  });
}

/** Failures that are worth another try (the request certainly never left, or the connection broke). */
const NOT_SENT_TRANSIENT = new Set([
  'ECONNREFUSED',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
]);
const MAYBE_SENT_TRANSIENT = new Set([
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ECONNABORTED',
  'UND_ERR_SOCKET',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);
/** Failures before any byte of the request was sent that another try will not fix: DNS, TLS verification, bad arguments. */
const NOT_SENT_PERMANENT =
  /^(ENOTFOUND|ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|ERR_INVALID_URL|UND_ERR_INVALID_ARG)/;

/** The innermost error code of an undici/system error. */
export function errorCode(err: unknown): string | undefined {
  let e = err as { code?: unknown; cause?: unknown } | undefined;
  let code: string | undefined;
  for (let depth = 0; e && depth < 5; depth++) {
    if (typeof e.code === 'string') code = e.code;
    e = e.cause as typeof e;
  }
  return code;
}

/**
 * `transient`: another try may work. `notSent`: the request certainly never reached the
 * server. Anything unknown counts as possibly sent, so a create is never assumed undone.
 */
export function classifyNetworkError(code: string | undefined): { transient: boolean; notSent: boolean } {
  if (!code) return { transient: false, notSent: false };
  if (NOT_SENT_TRANSIENT.has(code)) return { transient: true, notSent: true };
  if (MAYBE_SENT_TRANSIENT.has(code)) return { transient: true, notSent: false };
  return { transient: false, notSent: NOT_SENT_PERMANENT.test(code) };
}

/**
 * The failure says the service is not there at all (nothing listens, no route, no such host),
 * not that one request went wrong: every request after it would fail the same way.
 */
export function serviceUnreachable(err: unknown): err is NetworkError {
  return err instanceof NetworkError && err.code !== undefined && (NOT_SENT_TRANSIENT.has(err.code) || err.code === 'ENOTFOUND');
}

/** A short reason: the code and the innermost message (which never holds request headers). */
export function describeNetworkError(err: unknown): string {
  const messages: string[] = [];
  let e = err as { message?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; e && depth < 5; depth++) {
    if (typeof e.message === 'string' && e.message && !messages.includes(e.message)) messages.push(e.message);
    e = e.cause as typeof e;
  }
  const code = errorCode(err);
  const text = messages.join(': ') || 'unknown error';
  const reason = code && !text.includes(code) ? `${code} ${text}` : text;
  if (code && UNTRUSTED_CERTIFICATE.test(code)) return `${reason} (${UNTRUSTED_CERTIFICATE_HINT})`;
  return code === 'ERR_TLS_CERT_ALTNAME_INVALID' ? `${reason} (${WRONG_HOST_HINT})` : reason;
}

/**
 * The certificate is trusted but not for this host. The reference service presents a host's own
 * certificate only for an existing tenant (any other name gets its localhost one), so this is
 * what a mistyped tenant in the URL looks like.
 */
export const WRONG_HOST_HINT =
  "the certificate the service presented is not for this host name; the reference service (dpctl serve) has one only for an existing tenant's host, <tenant>.localhost: check the tenant in DATAPLATFORM_URL (dpctl --url, the provider's url)";

/** The service's certificate is not signed by a CA we trust: the usual case of a local service with its own CA. */
const UNTRUSTED_CERTIFICATE =
  /^(UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN)$/;
export const UNTRUSTED_CERTIFICATE_HINT =
  "the service's certificate is not trusted: point DATAPLATFORM_CA_FILE (dpctl --ca-file, the provider's ca_file) at its CA certificate, or for a throwaway local service set DATAPLATFORM_INSECURE=1 (--insecure)";
