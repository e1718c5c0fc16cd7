import { existsSync, linkSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Db } from '../store/db.js';
import { generateKey, masterKey, SecretsKeyError, type MasterKey } from './envelope.js';

/** Where the master key came from; `data-dir` and `database` are keys the service generated itself. */
export type KeyOrigin = 'file' | 'env' | 'data-dir' | 'database';

export interface KeyConfig {
  dataDir: string;
  databaseUrl?: string;
  /** --secrets-key-file: a file holding the base64 of 32 random bytes. */
  secretsKeyFile?: string;
  /** DP_SECRETS_KEY: the base64 of 32 random bytes. */
  secretsKey?: string;
}

export const AUTO_KEY_FILE = 'secrets.key';
/** meta rows: the id of the key the store is sealed with, an unfinished rotation, PostgreSQL's generated key. */
export const META = {
  keyId: 'secrets.key_id',
  rotatingTo: 'secrets.rotating_to',
  autoKey: 'secrets.master_key',
  clearMigrated: 'secrets.clear_migrated',
} as const;

const BASE64_KEY = /^[A-Za-z0-9+/_-]{43}=?$/;

export function parseKey(text: string, where: string): MasterKey {
  const trimmed = text.trim();
  if (!BASE64_KEY.test(trimmed))
    throw new SecretsKeyError(`${where} must hold a base64-encoded 32-byte key (make one with: openssl rand -base64 32)`);
  return masterKey(Buffer.from(trimmed.replace(/-/g, '+').replace(/_/g, '/'), 'base64'));
}

export function readKeyFile(path: string, where: string): MasterKey {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new SecretsKeyError(`${where} ${path} cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  return parseKey(text, `${where} ${path}`);
}

/** Writes a new random key to `path` (mode 0600, never over an existing file) and returns the key the file holds. */
export function writeNewKeyFile(path: string): MasterKey {
  const raw = generateKey();
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, raw.toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
  try {
    // link() fails if the file exists: of two processes generating at once, the first wins and both use its key.
    linkSync(tmp, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return readKeyFile(path, 'secrets key file');
  } finally {
    rmSync(tmp, { force: true });
  }
  return masterKey(raw);
}

export async function metaValue(db: Db, key: string): Promise<string | undefined> {
  return (await db.get<{ value: string }>('SELECT value FROM meta WHERE key = ?', [key]))?.value;
}

/** The configured key (flag, then env), or undefined when neither is given. */
export function configuredKey(config: KeyConfig): { key: MasterKey; origin: KeyOrigin } | undefined {
  if (config.secretsKeyFile) return { key: readKeyFile(config.secretsKeyFile, '--secrets-key-file'), origin: 'file' };
  if (config.secretsKey) return { key: parseKey(config.secretsKey, 'DP_SECRETS_KEY'), origin: 'env' };
  return undefined;
}

/** The key the service generated for itself, if there is one (never creates it). */
export async function existingAutoKey(db: Db, config: KeyConfig): Promise<{ key: MasterKey; origin: KeyOrigin } | undefined> {
  if (config.databaseUrl) {
    const stored = await metaValue(db, META.autoKey);
    return stored ? { key: parseKey(stored, `the generated key in the database's meta table`), origin: 'database' } : undefined;
  }
  const file = join(config.dataDir, AUTO_KEY_FILE);
  return existsSync(file) ? { key: readKeyFile(file, 'generated secrets key file'), origin: 'data-dir' } : undefined;
}

/**
 * Generates the service's own key: beside the SQLite file in the data dir (mode 0600), or, on
 * PostgreSQL, in the database's meta table so that every replica finds the same one (several
 * replicas with several data dirs could not share a generated file).
 */
export async function createAutoKey(db: Db, config: KeyConfig): Promise<{ key: MasterKey; origin: KeyOrigin }> {
  if (!config.databaseUrl) return { key: writeNewKeyFile(join(config.dataDir, AUTO_KEY_FILE)), origin: 'data-dir' };
  await db.run('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING', [
    META.autoKey,
    generateKey().toString('base64'),
  ]);
  return (await existingAutoKey(db, config))!;
}

export async function removeAutoKey(db: Db, config: KeyConfig): Promise<void> {
  if (config.databaseUrl) await db.run('DELETE FROM meta WHERE key = ?', [META.autoKey]);
  else rmSync(join(config.dataDir, AUTO_KEY_FILE), { force: true });
}
