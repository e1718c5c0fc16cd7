import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';

/**
 * Envelope encryption of write-only values with AES-256-GCM. Each sealed value has its own
 * random 256-bit data key, wrapped (AES-256-GCM too) by the master key. The text form is
 *
 *   enc:v1:<keyId>:<wrapped data key>:<iv>:<ciphertext>:<tag>      (parts base64url)
 *
 * so a row says which master key it needs (rotation selects rows by it) and the version lets
 * a later format live beside this one. Both layers authenticate the same associated data,
 * which names the row and field the value belongs to: a ciphertext copied to another row,
 * tenant or field fails to open instead of decrypting there.
 */

export const SEALED_PREFIX = 'enc:v1:';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class SecretsKeyError extends Error {}

export interface MasterKey {
  /** 16 hex characters derived from the key (an HMAC, so it reveals nothing about it). */
  id: string;
  key: Buffer;
}

/** Where a sealed value lives: bound into the ciphertext as associated data. */
export interface SealContext {
  tenantId: string;
  resourceId: string;
  /** The field (path) inside the row, e.g. `secrets`. */
  field: string;
}

export function masterKey(key: Buffer): MasterKey {
  if (key.length !== KEY_BYTES) throw new SecretsKeyError(`a secrets key must be ${KEY_BYTES} bytes, got ${key.length}`);
  return { id: createHmac('sha256', key).update('dataplatform secrets key id').digest('hex').slice(0, 16), key };
}

export const generateKey = (): Buffer => randomBytes(KEY_BYTES);

const b64 = (b: Buffer) => b.toString('base64url');
const aad = (keyId: string, c: SealContext, layer: 'dek' | 'value') =>
  Buffer.from(JSON.stringify(['dp-secrets', 1, layer, keyId, c.tenantId, c.resourceId, c.field]));

function gcmSeal(key: Buffer, plaintext: Buffer, associated: Buffer): { iv: Buffer; ct: Buffer; tag: Buffer } {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv).setAAD(associated);
  const ct = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return { iv, ct, tag: cipher.getAuthTag() };
}

function gcmOpen(key: Buffer, iv: Buffer, ct: Buffer, tag: Buffer, associated: Buffer): Buffer {
  if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new Error('malformed');
  const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES }).setAAD(associated);
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(ct), decipher.final()]);
}

export const isSealed = (text: string) => text.startsWith(SEALED_PREFIX);

/** The master key id a sealed value needs, or undefined for a value that is not sealed. */
export function sealedKeyId(text: string): string | undefined {
  return isSealed(text) ? text.slice(SEALED_PREFIX.length).split(':', 1)[0] : undefined;
}

export function seal(master: MasterKey, plaintext: string, c: SealContext): string {
  const dek = randomBytes(KEY_BYTES);
  const wrapped = gcmSeal(master.key, dek, aad(master.id, c, 'dek'));
  const value = gcmSeal(dek, Buffer.from(plaintext, 'utf8'), aad(master.id, c, 'value'));
  dek.fill(0);
  return (
    SEALED_PREFIX +
    [master.id, b64(Buffer.concat([wrapped.iv, wrapped.ct, wrapped.tag])), b64(value.iv), b64(value.ct), b64(value.tag)].join(':')
  );
}

/**
 * Opens a sealed value with whichever of `keys` it names. Errors say which key is missing or
 * that the value does not authenticate, never anything about the plaintext.
 */
export function open(keys: ReadonlyMap<string, MasterKey>, sealed: string, c: SealContext): string {
  const parts = sealed.slice(SEALED_PREFIX.length).split(':');
  if (!isSealed(sealed) || parts.length !== 5) throw new SecretsKeyError(`the secrets of ${c.resourceId} are not in a known sealed format`);
  const [keyId, wrappedText, ivText, ctText, tagText] = parts;
  const master = keys.get(keyId);
  if (!master) throw new SecretsKeyError(`the secrets of ${c.resourceId} are sealed with key ${keyId}, which is not configured`);
  try {
    const wrapped = Buffer.from(wrappedText, 'base64url');
    const dek = gcmOpen(
      master.key,
      wrapped.subarray(0, IV_BYTES),
      wrapped.subarray(IV_BYTES, wrapped.length - TAG_BYTES),
      wrapped.subarray(wrapped.length - TAG_BYTES),
      aad(keyId, c, 'dek'),
    );
    const plain = gcmOpen(
      dek,
      Buffer.from(ivText, 'base64url'),
      Buffer.from(ctText, 'base64url'),
      Buffer.from(tagText, 'base64url'),
      aad(keyId, c, 'value'),
    );
    dek.fill(0);
    return plain.toString('utf8');
  } catch {
    throw new SecretsKeyError(
      `the secrets of ${c.resourceId} do not authenticate (tampered, moved from another row, or a different key with the same id)`,
    );
  }
}
