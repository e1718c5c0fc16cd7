import { describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKey, masterKey, open, seal, SecretsKeyError, sealedKeyId } from '../../../src/service/secrets/envelope.js';
import { SecretCipher } from '../../../src/service/secrets/cipher.js';
import { parseKey, writeNewKeyFile } from '../../../src/service/secrets/keys.js';

const where = { tenantId: 'ten_1', resourceId: 'con_1', field: 'secrets' };
const keyA = masterKey(generateKey());
const keyB = masterKey(generateKey());
const ring = (...keys: ReturnType<typeof masterKey>[]) => new Map(keys.map((k) => [k.id, k]));

/** Flips one character of part `index` (0 = key id ... 4 = tag) of a sealed value. */
function tamper(sealed: string, index: number): string {
  const parts = sealed.split(':');
  const part = parts[2 + index];
  const i = Math.floor(part.length / 2);
  parts[2 + index] = part.slice(0, i) + (part[i] === 'A' ? 'B' : 'A') + part.slice(i + 1);
  return parts.join(':');
}

describe('secrets envelope (AES-256-GCM, data key wrapped by the master key)', () => {
  it('round-trips, names its key, and never contains the plaintext', () => {
    const sealed = seal(keyA, 'hunter2-very-secret', where);
    expect(sealed).toMatch(/^enc:v1:[0-9a-f]{16}:[\w-]+:[\w-]+:[\w-]+:[\w-]+$/);
    expect(sealedKeyId(sealed)).toBe(keyA.id);
    expect(sealed).not.toContain('hunter2');
    expect(open(ring(keyA), sealed, where)).toBe('hunter2-very-secret');
    // A fresh data key and IV each time: equal secrets do not look equal.
    expect(seal(keyA, 'hunter2-very-secret', where)).not.toBe(sealed);
  });

  it('refuses a tampered value: wrapped key, IV, ciphertext or tag', () => {
    const sealed = seal(keyA, 'password', where);
    for (const part of [1, 2, 3, 4]) expect(() => open(ring(keyA), tamper(sealed, part), where)).toThrow(/do not authenticate/);
    expect(() => open(ring(keyA), sealed.split(':').slice(0, 6).join(':'), where)).toThrow(SecretsKeyError);
  });

  it('refuses a value moved to another row, tenant or field (associated data)', () => {
    const sealed = seal(keyA, 'password', where);
    expect(() => open(ring(keyA), sealed, { ...where, resourceId: 'con_2' })).toThrow(/do not authenticate/);
    expect(() => open(ring(keyA), sealed, { ...where, tenantId: 'ten_2' })).toThrow(/do not authenticate/);
    expect(() => open(ring(keyA), sealed, { ...where, field: 'data' })).toThrow(/do not authenticate/);
  });

  it('refuses the wrong key: one not configured, or another key passed off under the right id', () => {
    const sealed = seal(keyA, 'password', where);
    expect(() => open(ring(keyB), sealed, where)).toThrow(new RegExp(`sealed with key ${keyA.id}, which is not configured`));
    const impostor = new Map([[keyA.id, { id: keyA.id, key: keyB.key }]]);
    expect(() => open(impostor, sealed, where)).toThrow(/do not authenticate/);
  });

  it('error messages never carry the plaintext', () => {
    const sealed = seal(keyA, 'do-not-print-me', where);
    try {
      open(ring(keyA), tamper(sealed, 3), where);
    } catch (err) {
      expect((err as Error).message).not.toContain('do-not-print-me');
    }
  });
});

describe('SecretCipher', () => {
  it('seals JSON under the primary, opens any configured key and legacy clear JSON', () => {
    const cipher = new SecretCipher(keyB, [keyA]);
    const old = new SecretCipher(keyA).seal({ credentials: { password: 'x' } }, 'ten_1', 'con_1');
    expect(cipher.open(old, 'ten_1', 'con_1')).toEqual({ credentials: { password: 'x' } });
    expect(cipher.open('{"config":{"signing_secret":"s"}}', 'ten_1', 'con_1')).toEqual({ config: { signing_secret: 's' } });
    expect(cipher.needsReseal(old)).toBe(true);
    expect(cipher.needsReseal('{"a":1}')).toBe(true);
    expect(cipher.needsReseal(cipher.seal({ a: 1 }, 'ten_1', 'con_1'))).toBe(false);
  });
});

describe('secrets keys', () => {
  it('parses base64 and base64url 32-byte keys and rejects anything else with a clear message', () => {
    const raw = generateKey();
    expect(parseKey(raw.toString('base64') + '\n', 'k').id).toBe(masterKey(raw).id);
    expect(parseKey(raw.toString('base64url'), 'k').id).toBe(masterKey(raw).id);
    for (const bad of [
      '',
      'short',
      generateKey().subarray(0, 16).toString('base64'),
      Buffer.alloc(48).toString('base64'),
      '!'.repeat(44),
    ]) {
      expect(() => parseKey(bad, 'DP_SECRETS_KEY')).toThrow(/DP_SECRETS_KEY must hold a base64-encoded 32-byte key/);
    }
  });

  it('writes a new key file with mode 0600 and never replaces an existing one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'dp-keys-'));
    const file = join(dir, 'secrets.key');
    const made = writeNewKeyFile(file);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(parseKey(readFileSync(file, 'utf8'), 'f').id).toBe(made.id);
    expect(writeNewKeyFile(file).id).toBe(made.id);
  });
});
