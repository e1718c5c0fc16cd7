import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';

/**
 * The self-signed certificate go-plugin's AutoMTLS expects from a plugin (see
 * notes/terraform-plugin-protocol.md), made with node:crypto and a few lines of DER.
 * A general X.509 library (@peculiar/x509 with its ASN.1 schema and DI stack) cost most of
 * the provider's start-up, which Terraform pays several times per command; this certificate
 * has one fixed shape, so it is written directly.
 */

function length(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

/** One DER element: tag, definite length, contents. */
const tlv = (tag: number, ...contents: Buffer[]): Buffer => {
  const body = Buffer.concat(contents);
  return Buffer.concat([Buffer.from([tag]), length(body.length), body]);
};

const sequence = (...items: Buffer[]) => tlv(0x30, ...items);
const set = (...items: Buffer[]) => tlv(0x31, ...items);
const bool = (v: boolean) => tlv(0x01, Buffer.from([v ? 0xff : 0x00]));
const utf8 = (s: string) => tlv(0x0c, Buffer.from(s, 'utf8'));
const octets = (b: Buffer) => tlv(0x04, b);
const bits = (b: Buffer, unused = 0) => tlv(0x03, Buffer.from([unused]), b);
/** [n] EXPLICIT */
const explicit = (n: number, inner: Buffer) => tlv(0xa0 | n, inner);

/** A non-negative INTEGER from big-endian bytes (a leading zero keeps the sign bit clear). */
function integer(b: Buffer): Buffer {
  let i = 0;
  while (i < b.length - 1 && b[i] === 0 && b[i + 1] < 0x80) i++;
  const v = b.subarray(i);
  return tlv(0x02, v[0] >= 0x80 ? Buffer.concat([Buffer.from([0]), v]) : v);
}

function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number);
  const out = [40 * a + b];
  for (const n of rest) {
    const chunk = [n & 0x7f];
    for (let v = n >>> 7; v > 0; v >>>= 7) chunk.unshift((v & 0x7f) | 0x80);
    out.push(...chunk);
  }
  return tlv(0x06, Buffer.from(out));
}

/** UTCTime, YYMMDDHHMMSSZ (valid for 1950-2049, as RFC 5280 requires for those years). */
function time(d: Date): Buffer {
  const p = (n: number) => String(n).padStart(2, '0');
  const s = `${p(d.getUTCFullYear() % 100)}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}Z`;
  return tlv(0x17, Buffer.from(s, 'ascii'));
}

const extension = (id: string, critical: boolean, value: Buffer) => sequence(oid(id), ...(critical ? [bool(true)] : []), octets(value));

const ECDSA_WITH_SHA256 = '1.2.840.10045.4.3.2';

export interface PluginCertificate {
  certPem: string;
  keyPem: string;
  /** The certificate's DER, base64 without padding: the handshake line's last field. */
  certDerB64: string;
}

const pem = (label: string, der: Buffer) =>
  `-----BEGIN ${label}-----\n${der
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .replace(/\n$/, '')}\n-----END ${label}-----\n`;

/**
 * A fresh ECDSA P-256 key and a self-signed certificate for `localhost`: CA, key usage
 * digitalSignature + keyEncipherment + keyCertSign, extended key usage serverAuth +
 * clientAuth, SAN DNS localhost, valid from 30 s ago for 24 hours.
 */
export function pluginCertificate(now = Date.now()): PluginCertificate {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const name = sequence(set(sequence(oid('2.5.4.10'), utf8('HashiCorp'))), set(sequence(oid('2.5.4.3'), utf8('localhost'))));
  const algorithm = sequence(oid(ECDSA_WITH_SHA256));
  const serial = randomBytes(16);
  serial[0] &= 0x7f;
  const extensions = sequence(
    extension('2.5.29.19', true, sequence(bool(true))), // basicConstraints: CA
    // keyUsage bits 0 (digitalSignature), 2 (keyEncipherment), 5 (keyCertSign): 1010 0100, 2 unused bits.
    extension('2.5.29.15', true, bits(Buffer.from([0xa4]), 2)),
    extension('2.5.29.37', false, sequence(oid('1.3.6.1.5.5.7.3.1'), oid('1.3.6.1.5.5.7.3.2'))), // serverAuth, clientAuth
    extension('2.5.29.17', false, sequence(tlv(0x82, Buffer.from('localhost', 'ascii')))), // SAN dNSName [2]
  );
  const tbs = sequence(
    explicit(0, integer(Buffer.from([2]))), // v3
    integer(serial),
    algorithm,
    name,
    sequence(time(new Date(now - 30_000)), time(new Date(now + 24 * 3600_000))),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    explicit(3, extensions),
  );
  const signature = sign('sha256', tbs, privateKey); // DER ECDSA-Sig-Value, as X.509 wants
  const der = sequence(tbs, algorithm, bits(signature));
  return {
    certPem: pem('CERTIFICATE', der),
    keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    certDerB64: der.toString('base64').replace(/=+$/, ''),
  };
}
