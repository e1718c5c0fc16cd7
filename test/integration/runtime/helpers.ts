import { createServer, type Server, type Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { expect, inject } from 'vitest';
import type { TestService, TestTenant } from '../../support/service.js';
import { withPg } from '../../support/postgres-server.js';
import type { HttpResponse } from '../../support/http.js';
import type { Run } from '../../../src/kinds/generated/kinds.js';

/**
 * A real PostgreSQL source for connectors: a fresh database on the test server (inject('pgUrl'),
 * provided to both vitest projects) with a `shop` schema of known tables and rows.
 */
export interface SourceDb {
  host: string;
  port: number;
  database: string;
  /** Connection string for the admin (superuser, no password). */
  adminUrl: string;
  admin: { username: string };
}

export const SHOP_ROWS = { orders: 3, customers: 2 } as const;

const serverUrl = () => inject('pgUrl');

/** One connection for `fn` (test/support/postgres-server.ts withPg). */
export const withClient = withPg;

/**
 * Source database layout:
 *   shop.orders (3 rows), shop.customers (2 rows), shop.internal_notes (1 row, not granted to the password role)
 *   slow.sleepy: a view whose count takes `slowSeconds`
 */
export async function createSourceDb(slowSeconds = 1): Promise<SourceDb> {
  const admin = new URL(serverUrl());
  const database = `dp_src_${randomBytes(5).toString('hex')}`;
  await withClient(admin.toString(), (c) => c.query(`CREATE DATABASE ${database}`));
  const url = new URL(admin.toString());
  url.pathname = `/${database}`;
  await withClient(url.toString(), async (c) => {
    await c.query(`
      CREATE SCHEMA shop;
      CREATE TABLE shop.orders (id bigint PRIMARY KEY, customer_id bigint NOT NULL, amount numeric(10,2), note text);
      INSERT INTO shop.orders VALUES (1, 1, 10.50, null), (2, 1, 20.00, 'gift'), (3, 2, 5.25, null);
      CREATE TABLE shop.customers (id bigint PRIMARY KEY, email varchar(200) NOT NULL, tags text[]);
      INSERT INTO shop.customers VALUES (1, 'a@example.com', '{vip}'), (2, 'b@example.com', null);
      CREATE TABLE shop.internal_notes (id int);
      INSERT INTO shop.internal_notes VALUES (1);
      CREATE SCHEMA slow;
      CREATE VIEW slow.sleepy AS SELECT 1 AS x FROM pg_sleep(${slowSeconds});
    `);
  });
  return {
    host: admin.hostname,
    port: Number(admin.port),
    database,
    adminUrl: url.toString(),
    admin: { username: decodeURIComponent(admin.username) || 'postgres' },
  };
}

export const SECURE_ROLE = 'dp_rt_secure';
export const SECURE_PASSWORD = 'S3cure-source-pw';

/**
 * A role that must give its password: the throwaway server trusts every connection, so a
 * pg_hba.conf line for this one role (scram-sha-256) is put first and the configuration
 * reloaded. Needs a superuser (the throwaway server's); false when that is not possible
 * (DP_TEST_DATABASE_URL pointing at another server), and password tests are then skipped.
 */
export async function ensurePasswordRole(source: SourceDb): Promise<boolean> {
  try {
    await withClient(serverUrl(), async (c) => {
      await c.query(`DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${SECURE_ROLE}') THEN CREATE ROLE ${SECURE_ROLE} LOGIN PASSWORD '${SECURE_PASSWORD}'; END IF;
      END $$`);
      const hbaFile = (await c.query('SHOW hba_file')).rows[0].hba_file as string;
      const current = (await c.query('SELECT pg_read_file($1) AS content', [hbaFile])).rows[0].content as string;
      const lines = `host all ${SECURE_ROLE} 127.0.0.1/32 scram-sha-256\nhost all ${SECURE_ROLE} ::1/128 scram-sha-256\n`;
      if (!current.startsWith(lines)) {
        const oid = (await c.query("SELECT lo_from_bytea(0, convert_to($1, 'UTF8')) AS oid", [lines + current])).rows[0].oid;
        try {
          await c.query('SELECT lo_export($1, $2)', [oid, hbaFile]);
        } finally {
          await c.query('SELECT lo_unlink($1)', [oid]);
        }
        await c.query('SELECT pg_reload_conf()');
      }
    });
    await withClient(source.adminUrl, (c) =>
      c.query(
        `GRANT CONNECT ON DATABASE ${source.database} TO ${SECURE_ROLE}; GRANT USAGE ON SCHEMA shop TO ${SECURE_ROLE}; GRANT SELECT ON shop.orders, shop.customers TO ${SECURE_ROLE};`,
      ),
    );
    // The reload is asynchronous: wait until the role really needs its password.
    const url = new URL(source.adminUrl);
    url.username = SECURE_ROLE;
    url.password = 'not-the-password';
    for (let i = 0; i < 50; i++) {
      const refused = await withClient(url.toString(), async () => false).catch((err: { code?: string }) => err.code === '28P01');
      if (refused) return true;
      await new Promise((r) => setTimeout(r, 100));
    }
    return false;
  } catch {
    return false;
  }
}

/** A local port nothing listens on: connecting is refused at once. */
export async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

/** A server that accepts connections and never says a word: a connection attempt can only time out. */
export async function silentServer(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const srv: Server = createServer((s) => {
    sockets.add(s);
    s.on('error', () => undefined);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  return {
    port: (srv.address() as { port: number }).port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => srv.close(r));
    },
  };
}

/** A run as the API returns it (generated from schemas/kinds/run.schema.json). */
export type { Run };

/** Polls a run (GET path) until it has ended. */
export async function waitForRun(svc: TestService, t: TestTenant, path: string, timeoutMs = 15_000): Promise<Run> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const run = await svc.ok<Run>(t, 'GET', path);
    if (run.status !== 'running' && run.status !== 'queued') return run;
    if (Date.now() > deadline) throw new Error(`run still ${run.status} after ${timeoutMs} ms: ${JSON.stringify(run)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Polls until fn gives a truthy value. */
export async function eventually<T>(fn: () => Promise<T | undefined | null | false>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The spec's error envelope with the expected status and code. */
export function expectError(res: HttpResponse, status: number, code: string, message?: RegExp) {
  expect(res.status, res.text).toBe(status);
  expect(res.body?.error?.code, res.text).toBe(code);
  if (message) expect(res.body.error.message).toMatch(message);
}

export const ms = (iso: string | null) => Date.parse(iso!);
