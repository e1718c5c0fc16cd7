import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { SQLITE_FILE } from '../context.js';
import { openDb, type Db } from '../store/db.js';
import { migrate } from '../store/migrations.js';
import { SecretCipher } from './cipher.js';
import { SecretsKeyError, type MasterKey } from './envelope.js';
import {
  configuredKey,
  existingAutoKey,
  META,
  metaValue,
  readKeyFile,
  removeAutoKey,
  writeNewKeyFile,
  type KeyConfig,
  type KeyOrigin,
} from './keys.js';
import { resealRows, withScrub } from './reseal.js';
import { META as RUNTIME_META, STALE_MS } from '../runtime/runtime.js';

export interface RotateOptions extends KeyConfig {
  /** The new master key; created (mode 0600) when the file does not exist. */
  newKeyFile: string;
  onProgress?: (p: { resealed: number; seq: number; maxSeq: number }) => void;
}

export interface RotateResult {
  oldKeyId?: string;
  newKeyId: string;
  resealed: number;
  createdNewKeyFile: boolean;
  /** The generated key that was retired (the service must now be started with the new key file). */
  removedAutoKey?: KeyOrigin;
}

const upsert = (db: Db, key: string, value: string) =>
  db.run('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [key, value]);

async function openStore(config: KeyConfig): Promise<Db> {
  const sqlitePath = join(config.dataDir, SQLITE_FILE);
  if (!config.databaseUrl && !existsSync(sqlitePath))
    throw new SecretsKeyError(`no store at ${sqlitePath}: pass the service's --data-dir (or --database-url)`);
  const db = await openDb({ databaseUrl: config.databaseUrl, sqlitePath });
  await migrate(db);
  return db;
}

/** The key that opens the store now: configured, else generated; checked against the store's key id. */
async function currentKey(db: Db, config: KeyConfig, storedId: string | undefined, newKey: MasterKey) {
  const current = configuredKey(config) ?? (await existingAutoKey(db, config));
  const needed = storedId && storedId !== newKey.id;
  if (needed && current?.key.id !== storedId) {
    throw new SecretsKeyError(
      `The store is sealed with key ${storedId}, ${current ? `not with key ${current.key.id}` : 'and no current key is configured'}: give the current key with --secrets-key-file or DP_SECRETS_KEY.`,
    );
  }
  return current;
}

/**
 * A running service seals new secrets with the key it started with, which the rotation retires
 * (and, for a generated key, deletes): rows written meanwhile could never be opened again. A live
 * service says so every HEARTBEAT_MS in `meta` (the runtime's instance rows, removed at a clean
 * stop), so a store with one heard from within STALE_MS is refused.
 */
async function refuseWhileServed(db: Db, now = Date.now()): Promise<void> {
  const rows = await db.all<{ key: string; value: string }>('SELECT key, value FROM meta WHERE key LIKE ?', [
    `${RUNTIME_META.instancePrefix}%`,
  ]);
  const live = rows.filter((r) => now - Number(r.value) < STALE_MS);
  if (!live.length) return;
  const newest = Math.max(...live.map((r) => Number(r.value)));
  throw new SecretsKeyError(
    `${live.length} service ${live.length === 1 ? 'replica is' : 'replicas are'} running on this store (last heard from ${Math.max(0, Math.round((now - newest) / 1000))} s ago): ` +
      `stop every replica first (one that did not stop cleanly counts as running for ${STALE_MS / 1000} s), then run this again. Nothing was changed.`,
  );
}

/**
 * Re-encrypts every write-only value under a new master key, window by window. Crash-safe:
 * the store records the rotation's target first (the service refuses to start while it is
 * set), each row carries the id of the key that sealed it, so running the command again
 * continues where it stopped; the store's key id changes and the retired generated key is
 * removed only when every row is done. The service must be stopped while it runs.
 */
export async function rotateKey(options: RotateOptions): Promise<RotateResult> {
  const db = await openStore(options);
  try {
    await refuseWhileServed(db);
    const createdNewKeyFile = !existsSync(options.newKeyFile);
    const newKey = createdNewKeyFile ? writeNewKeyFile(options.newKeyFile) : readKeyFile(options.newKeyFile, '--new-key-file');
    const rotatingTo = await metaValue(db, META.rotatingTo);
    if (rotatingTo && rotatingTo !== newKey.id)
      throw new SecretsKeyError(
        `An unfinished rotation to key ${rotatingTo} must be finished first: run this again with that --new-key-file.`,
      );
    const storedId = await metaValue(db, META.keyId);
    const current = await currentKey(db, options, storedId, newKey);

    await upsert(db, META.rotatingTo, newKey.id);
    const cipher = new SecretCipher(newKey, current ? [current.key] : []);
    const resealed = await withScrub(db, () =>
      resealRows(db, cipher, { select: (stored) => cipher.needsReseal(stored), onProgress: options.onProgress }),
    );
    await db.tx(async (q) => {
      await q.run('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [
        META.keyId,
        newKey.id,
      ]);
      await q.run('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING', [
        META.clearMigrated,
        new Date().toISOString(),
      ]);
      await q.run('DELETE FROM meta WHERE key = ?', [META.rotatingTo]);
    });
    let removedAutoKey: KeyOrigin | undefined;
    if (current && (current.origin === 'data-dir' || current.origin === 'database') && current.key.id !== newKey.id) {
      await removeAutoKey(db, options);
      removedAutoKey = current.origin;
    }
    return { oldKeyId: current?.key.id, newKeyId: newKey.id, resealed, createdNewKeyFile, removedAutoKey };
  } finally {
    await db.close();
  }
}
