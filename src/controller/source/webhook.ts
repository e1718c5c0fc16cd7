import { createHmac, timingSafeEqual } from 'node:crypto';

const equal = (a: Buffer, b: Buffer) => a.length === b.length && timingSafeEqual(a, b);

/**
 * Checks a GitHub-style signature: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw
 * body>` keyed with the shared secret. Compared in constant time.
 */
export function verifySignature(secret: string, body: Buffer, header: string | undefined): boolean {
  const m = /^sha256=([0-9a-f]{64})$/i.exec(header?.trim() ?? '');
  if (!m) return false;
  const expected = createHmac('sha256', secret).update(body).digest();
  return equal(expected, Buffer.from(m[1], 'hex'));
}

/** `sha256=<hex>` for a body: what a sender puts in X-Hub-Signature-256. */
export const signBody = (secret: string, body: Buffer | string) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

/** `Authorization: Bearer <secret>` (constant-time), the other way to call the control endpoints. */
export function verifyBearer(secret: string, header: string | undefined): boolean {
  const m = /^Bearer\s+(.+)$/i.exec(header?.trim() ?? '');
  return !!m && equal(Buffer.from(m[1]), Buffer.from(secret));
}
