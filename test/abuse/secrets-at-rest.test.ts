import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startService } from '../../src/service/server.js';
import type { ServiceOptions } from '../../src/service/context.js';
import { openDb, type Db } from '../../src/service/store/db.js';
import { SecretCipher } from '../../src/service/secrets/cipher.js';
import { generateKey, masterKey } from '../../src/service/secrets/envelope.js';
import { secretsCommand } from '../../src/cli/secrets.js';
import { startTestService, TestService, type TestTenant } from '../support/service.js';
import { TestHttp } from '../support/http.js';
import { loadOrCreateTls } from '../../src/service/tls.js';
import { createSourceDb, ensurePasswordRole, SECURE_PASSWORD, SECURE_ROLE, type SourceDb } from '../integration/runtime/helpers.js';
import { validSignature, webhookServer } from '../integration/alerting/webhook.js';
import { BYSTANDER_MAX_MS, whileServingOther } from './support.js';

/**
 * Attack 7: someone gets the database (the SQLite file and its WAL, a backup, a PostgreSQL dump)
 * and looks for the write-only values tenants gave: connector passwords, webhook signing
 * secrets, Slack webhook URLs. They must find only ciphertext, while the service still uses
 * the values; a store written in clear by an older version is sealed on start (in the
 * background, other tenants served meanwhile); rotate-key moves it under a new key.
 */
const SIGNING = 'whsec-at-rest-4f1c9a';
const SLACK_PATH = '/services/T0SECRET/B0SECRET/slack-at-rest-77d2';
const LEGACY_SIGNING = 'legacy-clear-signing-9b3e';
const LEGACY_BULK = 'legacy-clear-pw-';
/** Rows written in clear "by an older version", sealed by the start-up migration. */
const LEGACY_ROWS = 10_000;

let svc: TestService;
let dataDir: string;
let databaseUrl: string | undefined;
let src: SourceDb;
let passwordAuth: boolean;
let hook: Awaited<ReturnType<typeof webhookServer>>;
/** Slack webhook URLs must be HTTPS: a receiver whose CA the service is told to trust. */
let slack: Awaited<ReturnType<typeof webhookServer>>;
let outboundCaFile: string;
let t: TestTenant;
let bystander: TestTenant;
let base: string;
const ids: Record<string, string> = {};
const keyDir = mkdtempSync(join(tmpdir(), 'dp-keys-'));
const caDir = mkdtempSync(join(tmpdir(), 'dp-slack-ca-'));

const sourcePassword = () => (passwordAuth ? SECURE_PASSWORD : 'unused-pw-at-rest-3c1d');

async function boot(options: Partial<ServiceOptions> = {}): Promise<TestService> {
  const service = await startService({
    port: 0,
    logLevel: 'silent',
    rateLimit: 100_000,
    timeScale: 1000,
    outboundCaFile,
    dataDir,
    databaseUrl,
    ...options,
  });
  const next = new TestService(service, new TestHttp(service.tls.certPath), dataDir);
  // The tenants and their tokens live in the store; only the port changed.
  t = { ...t, base: next.url(t.slug) };
  bystander = { ...bystander, base: next.url(bystander.slug) };
  return next;
}

/** Stops the service but keeps its data dir (TestService.close would delete it). */
async function stop(s: TestService) {
  await s.service.close();
  await s.http.close();
}

const storeDb = () => openDb({ databaseUrl, sqlitePath: join(dataDir, 'dataplatform.sqlite') });

/**
 * What an attacker holding the store sees. SQLite: every file of the data dir except the key,
 * as bytes (the database, its WAL and shared memory), like `strings` would. PostgreSQL: every
 * row of every table, as text.
 */
async function rawStore(): Promise<string> {
  if (!databaseUrl) {
    return readdirSync(dataDir)
      .filter((f) => f.startsWith('dataplatform.sqlite'))
      .map((f) => readFileSync(join(dataDir, f)).toString('latin1'))
      .join('\n');
  }
  const db = await storeDb();
  try {
    const tables = await db.all<{ name: string }>("SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public'");
    const out: string[] = [];
    for (const { name } of tables) out.push(...(await db.all<{ row: string }>(`SELECT t::text AS row FROM "${name}" t`)).map((r) => r.row));
    return out.join('\n');
  } finally {
    await db.close();
  }
}

async function expectNoSecretsIn(dump: string) {
  for (const secret of [SECURE_PASSWORD, 'unused-pw-at-rest', SIGNING, 'slack-at-rest-77d2', 'T0SECRET', LEGACY_SIGNING, LEGACY_BULK])
    expect(dump.includes(secret), `"${secret}" is in the store in clear`).toBe(false);
}

/** The secrets still work: the connection test logs in with the password, deliveries carry the HMAC and reach the Slack URL. */
async function expectSecretsWork(s: TestService, signing: string) {
  const test = await s.ok(t, 'POST', `${base}/connectors/${ids.connector}/test`, {}, 200);
  expect(test.success, test.message).toBe(true);
  const [before, slackBefore] = [hook.received.length, slack.received.length];
  expect(await s.ok(t, 'POST', `${base}/notification-channels/${ids.webhook}/test`, {}, 200)).toMatchObject({ success: true });
  expect(await s.ok(t, 'POST', `${base}/notification-channels/${ids.slack}/test`, {}, 200)).toMatchObject({ success: true });
  const got = hook.received.slice(before);
  expect(
    validSignature(
      got.find((r) => r.path === '/signed')!,
      signing,
    ),
  ).toBe(true);
  expect(slack.received.slice(slackBefore).some((r) => r.path === SLACK_PATH)).toBe(true);
}

beforeAll(async () => {
  const slackTls = await loadOrCreateTls({ dataDir: caDir });
  outboundCaFile = slackTls.certPath;
  [svc, src, hook, slack] = await Promise.all([
    startTestService({ timeScale: 1000, outboundCaFile }),
    createSourceDb(0.1),
    webhookServer(),
    webhookServer({ tls: { cert: slackTls.cert, key: slackTls.key } }),
  ]);
  dataDir = svc.dataDir;
  databaseUrl = svc.service.ctx.options.databaseUrl;
  passwordAuth = await ensurePasswordRole(src);
  [t, bystander] = await Promise.all([svc.tenant(), svc.tenant()]);
  const project = await svc.project(t, 'secrets');
  ids.project = project.id;
  base = `/projects/${project.id}`;
});
afterAll(async () => {
  await stop(svc).catch(() => undefined);
  await hook?.close();
  await slack?.close();
  rmSync(caDir, { recursive: true, force: true });
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(keyDir, { recursive: true, force: true });
});

describe('attack 7: reading write-only values from the store', () => {
  it('a SQLite store is created readable by its owner only, its -wal too (other local users could read every tenant)', () => {
    if (databaseUrl) return;
    for (const file of ['dataplatform.sqlite', 'dataplatform.sqlite-wal'])
      expect((statSync(join(dataDir, file)).mode & 0o777).toString(8), file).toBe('600');
  });

  it('connector passwords, signing secrets and Slack URLs are only ciphertext in the store, and still work', async () => {
    const { probe } = await whileServingOther(svc, bystander, async () => {
      const credentials = passwordAuth
        ? { username: SECURE_ROLE, password: SECURE_PASSWORD }
        : { username: src.admin.username, password: sourcePassword() };
      ids.connector = (
        await svc.ok(t, 'POST', `${base}/connectors`, {
          body: {
            name: 'pg',
            connector_type: 'postgresql',
            config: { host: src.host, port: src.port, database: src.database, schema: 'shop', ssl_mode: 'disable' },
            credentials,
            selected_tables: ['shop.orders'],
          },
        })
      ).id;
      ids.webhook = (
        await svc.ok(t, 'POST', `${base}/notification-channels`, {
          body: { name: 'hook', type: 'webhook', config: { url: hook.url('/signed'), signing_secret: SIGNING } },
        })
      ).id;
      ids.slack = (
        await svc.ok(t, 'POST', `${base}/notification-channels`, {
          body: { name: 'slack', type: 'slack', config: { slack_webhook_url: slack.url(SLACK_PATH) } },
        })
      ).id;
      await expectSecretsWork(svc, SIGNING);
    });
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
    await svc.service.secretsMigration;
    const rows = await svc.service.ctx.db.all<{ secrets: string }>('SELECT secrets FROM resources WHERE id IN (?, ?, ?)', [
      ids.connector,
      ids.webhook,
      ids.slack,
    ]);
    expect(rows).toHaveLength(3);
    for (const r of rows) expect(r.secrets).toMatch(/^enc:v1:[0-9a-f]{16}:/);
    await expectNoSecretsIn(await rawStore());
  });

  it('a sealed value copied to another row does not open there', async () => {
    const db = svc.service.ctx.db;
    const sealed = async (id: string) => (await db.get<{ secrets: string }>('SELECT secrets FROM resources WHERE id = ?', [id]))!.secrets;
    const own = await sealed(ids.slack);
    await db.run('UPDATE resources SET secrets = ? WHERE id = ?', [await sealed(ids.webhook), ids.slack]);
    const res = await svc.call(t, 'POST', `${base}/notification-channels/${ids.slack}/test`);
    expect(res.status).toBe(500);
    expect(res.body.error.code).toBe('internal_error');
    expect(res.text).not.toContain(SIGNING);
    await db.run('UPDATE resources SET secrets = ? WHERE id = ?', [own, ids.slack]);
    expect(await svc.ok(t, 'POST', `${base}/notification-channels/${ids.slack}/test`, {}, 200)).toMatchObject({ success: true });
  });

  it(
    'a store written in clear by an older version is sealed on start, in the background, other tenants served meanwhile',
    { timeout: 120_000 },
    async () => {
      await stop(svc);
      const db = await storeDb();
      try {
        await seedLegacyClearRows(db);
      } finally {
        await db.close();
      }
      expect(await rawStore()).toContain(LEGACY_SIGNING);

      svc = await boot();
      const started = performance.now();
      const { result: sealed, probe } = await whileServingOther(svc, bystander, () => svc.service.secretsMigration);
      const tookMs = performance.now() - started;
      expect(sealed).toBe(LEGACY_ROWS + 2);
      expect(probe.failures).toEqual([]);
      expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
      console.log(
        `sealed ${sealed} clear rows in ${Math.round(tookMs)} ms; bystander: ${probe.count} calls, p50 ${Math.round(probe.p50)} ms, max ${Math.round(probe.max)} ms`,
      );
      await expectNoSecretsIn(await rawStore());
      await expectSecretsWork(svc, LEGACY_SIGNING);

      // Idempotent: the next start finds nothing to do.
      await stop(svc);
      svc = await boot();
      expect(await svc.service.secretsMigration).toBe(0);
    },
  );

  it(
    'rotate-key re-encrypts everything under a new key; the old key no longer opens the store; a wrong key stops start-up with a clear error',
    { timeout: 120_000 },
    async () => {
      const db0 = svc.service.ctx.db;
      const oldKey = databaseUrl
        ? (await db0.get<{ value: string }>("SELECT value FROM meta WHERE key = 'secrets.master_key'"))!.value
        : readFileSync(join(dataDir, 'secrets.key'), 'utf8').trim();
      const sealedBefore = (await db0.get<{ secrets: string }>('SELECT secrets FROM resources WHERE id = ?', [ids.connector]))!.secrets;
      const newKeyFile = join(keyDir, 'new.key');
      const args = [
        'rotate-key',
        '--data-dir',
        dataDir,
        '--new-key-file',
        newKeyFile,
        ...(databaseUrl ? ['--database-url', databaseUrl] : []),
      ];
      // While the service runs on the store it goes on sealing with the key the rotation retires:
      // refused, nothing changed (not even the new key file written).
      await expect(secretsCommand().exitOverride().parseAsync(args, { from: 'user' })).rejects.toThrow(
        /^1 service replica is running on this store \(last heard from \d+ s ago\): stop every replica first/,
      );
      expect(existsSync(newKeyFile)).toBe(false);
      expect((await db0.get<{ secrets: string }>('SELECT secrets FROM resources WHERE id = ?', [ids.connector]))!.secrets).toBe(
        sealedBefore,
      );
      await stop(svc);

      await secretsCommand().exitOverride().parseAsync(args, { from: 'user' });
      const newKey = masterKey(Buffer.from(readFileSync(newKeyFile, 'utf8').trim(), 'base64'));

      const db = await storeDb();
      try {
        const rows = await db.all<{ id: string; tenant_id: string; secrets: string }>(
          'SELECT id, tenant_id, secrets FROM resources WHERE secrets IS NOT NULL',
        );
        expect(rows.length).toBe(LEGACY_ROWS + 3);
        expect(rows.filter((r) => !r.secrets.startsWith(`enc:v1:${newKey.id}:`))).toEqual([]);
        // The old key opens neither the rows now nor (by design) anything the rotation wrote.
        const connector = rows.find((r) => r.id === ids.connector)!;
        expect(connector.secrets).not.toBe(sealedBefore);
        const oldCipher = new SecretCipher(masterKey(Buffer.from(oldKey, 'base64')));
        expect(() => oldCipher.open(connector.secrets, connector.tenant_id, connector.id)).toThrow(/not configured/);
        expect(new SecretCipher(newKey).open(connector.secrets, connector.tenant_id, connector.id)).toMatchObject({
          credentials: { password: sourcePassword() },
        });
        // The generated key is gone from where it was kept.
        if (databaseUrl) expect(await db.get("SELECT value FROM meta WHERE key = 'secrets.master_key'")).toBeUndefined();
      } finally {
        await db.close();
      }

      // Running it again is harmless (crash-safe: it continues where it stopped, here with nothing left).
      await secretsCommand().exitOverride().parseAsync(args, { from: 'user' });

      // The old key, no key, and a random key: start-up stops with a message naming the keys.
      await expect(boot({ secretsKey: oldKey })).rejects.toThrow(new RegExp(`sealed with key ${newKey.id}, but DP_SECRETS_KEY holds key`));
      await expect(boot()).rejects.toThrow(/no key is configured: pass it with --secrets-key-file or DP_SECRETS_KEY/);
      const wrongFile = join(keyDir, 'wrong.key');
      writeFileSync(wrongFile, generateKey().toString('base64'));
      await expect(boot({ secretsKeyFile: wrongFile })).rejects.toThrow(
        /sealed with key [0-9a-f]{16}, but the --secrets-key-file holds key/,
      );
      writeFileSync(wrongFile, 'not a key');
      await expect(boot({ secretsKeyFile: wrongFile })).rejects.toThrow(/--secrets-key-file .* must hold a base64-encoded 32-byte key/);

      svc = await boot({ secretsKeyFile: newKeyFile });
      const { probe } = await whileServingOther(svc, bystander, () => expectSecretsWork(svc, LEGACY_SIGNING));
      expect(probe.failures).toEqual([]);
      expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
      await expectNoSecretsIn(await rawStore());
    },
  );
});

/**
 * Simulates a store from before encryption at rest: the webhook channel's secrets in clear,
 * plus many clear rows (another project), and no record that the migration ran.
 */
async function seedLegacyClearRows(db: Db) {
  const tenantId = (await db.get<{ tenant_id: string }>('SELECT tenant_id FROM resources WHERE id = ?', [ids.webhook]))!.tenant_id;
  await db.run('UPDATE resources SET secrets = ? WHERE id = ?', [
    JSON.stringify({ config: { signing_secret: LEGACY_SIGNING } }),
    ids.webhook,
  ]);
  await db.run('UPDATE resources SET secrets = ? WHERE id = ?', [
    JSON.stringify({ config: { slack_webhook_url: slack.url(SLACK_PATH) } }),
    ids.slack,
  ]);
  await db.run("DELETE FROM meta WHERE key = 'secrets.clear_migrated'");
  const series =
    db.dialect === 'sqlite'
      ? `WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ${LEGACY_ROWS}) SELECT n FROM s`
      : `SELECT generate_series(1, ${LEGACY_ROWS}) AS n`;
  await db.run(
    `INSERT INTO resources (id, tenant_id, project_id, kind, parent_id, name, data, secrets, created_at, updated_at)
     SELECT 'con_legacy_' || n, ?, 'prj_legacy', 'connector', '', 'legacy-' || n, '{}', '{"credentials":{"password":"${LEGACY_BULK}' || n || '"}}', '2020-01-01T00:00:00Z', '2020-01-01T00:00:00Z' FROM (${series}) AS numbers`,
    [tenantId],
  );
}
