import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createSecureContext, type SecureContext } from 'node:tls';
import * as x509 from '@peculiar/x509';
import { LRUCache } from 'lru-cache';

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };

export interface TlsMaterial {
  /** Certificate and key served when the client sends no (or an unknown) server name. */
  cert: string;
  key: string;
  /** The file clients trust: our local CA, or the given certificate. */
  certPath: string;
  /** Issues a certificate per host name (<tenant>.localhost) when we own the CA. */
  SNICallback?: (servername: string, cb: (err: Error | null, ctx?: SecureContext) => void) => void;
  /** What the per-host certificates cost so far (absent with given files). */
  certStats?: () => CertStats;
}

export interface CertStats {
  /** Certificates (each with its own key) issued since start. */
  issued: number;
  /** Certificates kept now, at most the cache size. */
  cached: number;
}

/** Default for the most per-host certificates kept: each costs ~50 KB of memory (mostly OpenSSL's) and ~7 ms of CPU to issue. */
export const DEFAULT_CERT_CACHE_SIZE = 500;

const toPem = (der: ArrayBuffer, label: string) =>
  `-----BEGIN ${label}-----\n${Buffer.from(der)
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .replace(/\n$/, '')}\n-----END ${label}-----\n`;

const serial = () =>
  Buffer.from(webcrypto.getRandomValues(new Uint8Array(8)))
    .toString('hex')
    .replace(/^[89a-f]/, '1');

interface KeyedCert {
  cert: x509.X509Certificate;
  keys: CryptoKeyPair;
}

async function importKeyPair(certPem: string, keyPem: string): Promise<KeyedCert> {
  const cert = new x509.X509Certificate(certPem);
  const der = Buffer.from(keyPem.replace(/-----[^-]+-----|\s/g, ''), 'base64');
  const privateKey = await webcrypto.subtle.importKey('pkcs8', der, ALG, true, ['sign']);
  const publicKey = await cert.publicKey.export(ALG, ['verify']);
  return { cert, keys: { privateKey, publicKey } as CryptoKeyPair };
}

/**
 * TLS clients reject a `*.localhost` wildcard (its parent has one label), so, like mkcert,
 * we keep a local CA in the data dir and issue one certificate per host name on demand.
 */
async function loadOrCreateCa(dir: string): Promise<KeyedCert & { path: string }> {
  const certPath = join(dir, 'ca.pem');
  const keyPath = join(dir, 'ca-key.pem');
  if (existsSync(certPath) && existsSync(keyPath)) {
    return { ...(await importKeyPair(readFileSync(certPath, 'utf8'), readFileSync(keyPath, 'utf8'))), path: certPath };
  }
  const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: 'CN=dpctl local CA',
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 10 * 365 * 24 * 3600 * 1000),
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  mkdirSync(dir, { recursive: true });
  writeFileSync(certPath, cert.toString('pem') + '\n');
  writeFileSync(keyPath, toPem(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey), 'PRIVATE KEY'), { mode: 0o600 });
  return { cert, keys, path: certPath };
}

async function issueLeaf(ca: KeyedCert, hostname: string): Promise<{ cert: string; key: string }> {
  const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
  const names = [{ type: 'dns' as const, value: hostname }];
  const ips =
    hostname === 'localhost'
      ? [
          { type: 'ip' as const, value: '127.0.0.1' },
          { type: 'ip' as const, value: '::1' },
        ]
      : [];
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${hostname}`,
    issuer: ca.cert.subject,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 397 * 24 * 3600 * 1000),
    signingAlgorithm: ALG,
    publicKey: keys.publicKey,
    signingKey: ca.keys.privateKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension([...names, ...ips]),
      await x509.AuthorityKeyIdentifierExtension.create(ca.cert),
    ],
  });
  return { cert: cert.toString('pem') + '\n', key: toPem(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey), 'PRIVATE KEY') };
}

export interface TlsOptions {
  certFile?: string;
  keyFile?: string;
  dataDir: string;
  baseDomain?: string;
  /**
   * Whether a host name under ours deserves its own certificate (the service: it is a tenant's).
   * Without it every such name does; either way at most `certCacheSize` are kept.
   */
  issuable?: (hostname: string) => Promise<boolean>;
  /** Most per-host certificates kept; the least recently used is dropped (and issued again if asked). */
  certCacheSize?: number;
}

/**
 * Given files win; otherwise our local CA (created once in the data dir) issues certificates per
 * host. A TLS client names any host it likes before it has any credential, so a name gets a key
 * and certificate only when `issuable` says so, and the cache of them is bounded: any other name
 * is answered with the default (localhost) certificate, which costs nothing.
 */
export async function loadOrCreateTls(options: TlsOptions): Promise<TlsMaterial> {
  if (options.certFile || options.keyFile) {
    if (!options.certFile || !options.keyFile) throw new Error('--tls-cert and --tls-key go together');
    return { cert: readFileSync(options.certFile, 'utf8'), key: readFileSync(options.keyFile, 'utf8'), certPath: options.certFile };
  }
  const ca = await loadOrCreateCa(join(options.dataDir, 'tls'));
  const fallback = await issueLeaf(ca, 'localhost');
  const ours = (name: string) =>
    name.endsWith('.localhost') || (!!options.baseDomain && (name === options.baseDomain || name.endsWith(`.${options.baseDomain}`)));
  const contexts = new LRUCache<string, Promise<SecureContext>>({ max: Math.max(1, options.certCacheSize ?? DEFAULT_CERT_CACHE_SIZE) });
  let issued = 0;
  const contextFor = async (name: string): Promise<SecureContext | undefined> => {
    if (!contexts.has(name) && options.issuable && !(await options.issuable(name))) return undefined;
    let pending = contexts.get(name);
    if (!pending) {
      issued++;
      pending = issueLeaf(ca, name).then(({ cert, key }) => createSecureContext({ cert, key }));
      contexts.set(name, pending);
      // A failed issue is not cached: the next handshake tries again.
      pending.catch(() => contexts.get(name) === pending && contexts.delete(name));
    }
    return pending;
  };
  return {
    ...fallback,
    certPath: ca.path,
    certStats: () => ({ issued, cached: contexts.size }),
    SNICallback(servername, cb) {
      const name = servername.toLowerCase();
      // `localhost` and names that are not ours get the default certificate.
      if (!ours(name)) return cb(null, undefined);
      contextFor(name).then(
        (ctx) => cb(null, ctx),
        // A failing lookup or issue still completes the handshake, with the default certificate.
        () => cb(null, undefined),
      );
    },
  };
}
