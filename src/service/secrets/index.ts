import type { Db } from '../store/db.js';
import { SecretCipher } from './cipher.js';
import { isSealed, SecretsKeyError, type MasterKey } from './envelope.js';
import { configuredKey, createAutoKey, existingAutoKey, META, metaValue, type KeyConfig, type KeyOrigin } from './keys.js';
import { resealRows, withScrub } from './reseal.js';

export { SecretCipher } from './cipher.js';
export { SecretsKeyError } from './envelope.js';
export type { KeyConfig, KeyOrigin } from './keys.js';

export interface SecretsSetup {
  cipher: SecretCipher;
  origin: KeyOrigin;
}

const ORIGIN_TEXT: Record<KeyOrigin, string> = {
  file: 'the --secrets-key-file',
  env: 'DP_SECRETS_KEY',
  'data-dir': 'the generated key file in the data dir',
  database: "the generated key in the database's meta table",
};

export const describeOrigin = (origin: KeyOrigin) => ORIGIN_TEXT[origin];

function mismatch(storedId: string, key: MasterKey, origin: KeyOrigin): SecretsKeyError {
  return new SecretsKeyError(
    `The secrets in this store are sealed with key ${storedId}, but ${describeOrigin(origin)} holds key ${key.id}. ` +
      'Start with the key the store was written with (--secrets-key-file or DP_SECRETS_KEY; every replica needs the same one), ' +
      'or move the store to the new key with `dpctl secrets rotate-key --new-key-file <file>`.',
  );
}

/**
 * Finds the master key (flag, env, else the service's generated one, made on first start) and
 * checks it is the key the store is sealed with, so a wrong key stops start-up with a clear
 * message instead of failing request by request.
 */
export async function openSecrets(db: Db, config: KeyConfig): Promise<SecretsSetup> {
  const rotatingTo = await metaValue(db, META.rotatingTo);
  if (rotatingTo)
    throw new SecretsKeyError(
      `A rotation of the secrets key to key ${rotatingTo} is unfinished: run \`dpctl secrets rotate-key\` again with the same --new-key-file to finish it, then start with that key.`,
    );
  const storedId = await metaValue(db, META.keyId);
  let chosen = configuredKey(config) ?? (await existingAutoKey(db, config));
  if (!chosen) {
    if (storedId)
      throw new SecretsKeyError(
        `The secrets in this store are sealed with key ${storedId}, but no key is configured: pass it with --secrets-key-file or DP_SECRETS_KEY.`,
      );
    chosen = await createAutoKey(db, config);
  }
  if (!storedId) await db.run('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING', [META.keyId, chosen.key.id]);
  // Read back: of two replicas starting on an empty store with different keys, the second stops here.
  const bound = storedId ?? (await metaValue(db, META.keyId))!;
  if (bound !== chosen.key.id) throw mismatch(bound, chosen.key, chosen.origin);
  return { cipher: new SecretCipher(chosen.key), origin: chosen.origin };
}

/**
 * Seals the rows written in clear before encryption at rest existed, in the background after
 * start-up (reads accept both forms meanwhile). Runs once per store: a meta flag records that
 * it finished, so later starts do not scan.
 */
export async function sealClearSecrets(db: Db, cipher: SecretCipher, signal?: AbortSignal): Promise<number> {
  if (await metaValue(db, META.clearMigrated)) return 0;
  const sealed = await withScrub(db, () => resealRows(db, cipher, { select: (stored) => !isSealed(stored), signal }));
  if (!signal?.aborted)
    await db.run('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING', [
      META.clearMigrated,
      new Date().toISOString(),
    ]);
  return sealed;
}
