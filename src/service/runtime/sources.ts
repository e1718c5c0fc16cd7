import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import pg from 'pg';
import { EgressDenied, type EgressPolicy } from '../egress.js';
import type { StoredResource } from '../store/resources.js';
import { kind } from '../../kinds/index.js';

/**
 * Connector sources. `postgresql` is real: the service connects with the connector's config and
 * credentials (the stored write-only password) and reads information_schema and row counts.
 * Every other type is simulated deterministically from hashes of the table names.
 */

/** A failure to report to the user: the message is safe to show (never a secret). */
export class SourceError extends Error {}

export interface SourceSettings {
  connectorType: string;
  host?: string;
  port?: number;
  database?: string;
  schema: string;
  sslMode?: 'disable' | 'prefer' | 'require' | 'verify-full';
  username?: string;
  password?: string;
  selectedTables: string[];
}

/** What a connector resource says about its source (its write-only password from `secrets`). */
export function sourceSettings(connector: StoredResource): SourceSettings {
  const config = (connector.data.config ?? {}) as Record<string, unknown>;
  const credentials = (connector.data.credentials ?? {}) as Record<string, unknown>;
  const secretCredentials = ((connector.secrets ?? {}).credentials ?? {}) as Record<string, unknown>;
  return {
    connectorType: String(connector.data.connector_type),
    host: config.host as string | undefined,
    port: config.port as number | undefined,
    database: config.database as string | undefined,
    schema: (config.schema as string | undefined) || 'public',
    sslMode: config.ssl_mode as SourceSettings['sslMode'],
    username: credentials.username as string | undefined,
    password: secretCredentials.password as string | undefined,
    selectedTables: (connector.data.selected_tables as string[] | undefined) ?? [],
  };
}

export const isReal = (s: SourceSettings) => s.connectorType === 'postgresql';

/** A table of the source: `schema.table`, or `table` in the connector's schema. */
export function splitTable(name: string, defaultSchema: string): { schema: string; table: string } {
  const dot = name.indexOf('.');
  return dot > 0 ? { schema: name.slice(0, dot), table: name.slice(dot + 1) } : { schema: defaultSchema, table: name };
}

const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** Stable unsigned 32-bit hash of a string: the seed of everything simulated. */
export function hash32(value: string): number {
  return createHash('sha256').update(value).digest().readUInt32BE(0);
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

// ---------------------------------------------------------------------------------------------
// PostgreSQL

function where(s: SourceSettings) {
  return `${s.host}:${s.port ?? 5432}`;
}

/** Turns a driver or server error into a sentence for the user. */
export function describeError(err: unknown, s: SourceSettings, timeoutSeconds: number): string {
  if (err instanceof SourceError || err instanceof EgressDenied) return err.message;
  const e = err as { code?: string; message?: string };
  const message = e.message ?? String(err);
  switch (e.code) {
    case 'ECONNREFUSED':
      return `Host unreachable: connection to ${where(s)} refused (is PostgreSQL listening there?)`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `Host unreachable: host name "${s.host}" could not be resolved`;
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return `Host unreachable: no route to ${where(s)}`;
    case 'ETIMEDOUT':
      return `Host unreachable: connecting to ${where(s)} timed out after ${timeoutSeconds} s`;
    case 'ECONNRESET':
    case 'EPIPE':
      return `Connection to ${where(s)} was closed by the server: ${message}`;
    case '28P01':
      return `Authentication failed for user "${s.username}": the password was rejected by ${where(s)}`;
    case '28000':
      return `Authentication failed for user "${s.username}": ${message}`;
    case '3D000':
      return `Database "${s.database}" does not exist on ${where(s)}`;
    case '42P01':
      return message.replace(/^relation/, 'table');
    case '42501':
      return `Permission denied: ${message}`;
    case '57014':
      return `Query cancelled after ${timeoutSeconds} s: ${message}`;
  }
  if (/timeout/i.test(message)) return `Host unreachable: no answer from ${where(s)} within ${timeoutSeconds} s`;
  if (/client password must be/i.test(message))
    return `Authentication failed for user "${s.username}": the source asks for a password and none is stored (credentials.password)`;
  if (/does not support SSL/i.test(message)) return `${where(s)} does not support SSL, but ssl_mode is ${s.sslMode}`;
  if (/self[- ]signed|certificate/i.test(message)) return `TLS certificate of ${where(s)} not accepted (ssl_mode ${s.sslMode}): ${message}`;
  return `Connection to ${where(s)} failed: ${message}`;
}

function clientConfig(s: SourceSettings, address: string, timeoutSeconds: number, ssl: pg.ClientConfig['ssl']): pg.ClientConfig {
  const password = s.password ?? '';
  return {
    // Every parameter is explicit, so nothing comes from the service's PG* environment or ~/.pgpass.
    // `address` is the one the egress policy checked: pg connects to it, never resolving the name again.
    host: address,
    port: s.port ?? 5432,
    database: s.database || s.username,
    user: s.username,
    password: async () => password,
    ssl,
    connectionTimeoutMillis: Math.max(1, Math.round(timeoutSeconds * 1000)),
    application_name: 'dataplatform-connector',
  };
}

/**
 * Connects to a postgresql source within the timeout. ssl_mode as libpq: disable (plain),
 * prefer (TLS when the server offers it, else plain; the default), require (TLS, any
 * certificate), verify-full (TLS, certificate checked against the host name).
 * The host is resolved once and checked by the egress policy before any packet is sent (pg
 * takes no `lookup`): a denied host answers the same, at once, whether its port is open or not.
 */
export async function connectPostgres(
  s: SourceSettings,
  timeoutSeconds: number,
  egress: EgressPolicy,
  signal?: AbortSignal,
): Promise<pg.Client> {
  if (!s.host) throw new SourceError('config.host is not set');
  if (!s.username) throw new SourceError('credentials.username is not set');
  const address = await egress.resolve(s.host, Math.max(1, Math.round(timeoutSeconds * 1000)));
  // The certificate is checked against (and SNI names) the host the user gave, not the address.
  const servername = isIP(s.host) ? {} : { servername: s.host };
  const attempt = async (ssl: pg.ClientConfig['ssl']) => {
    const client = new pg.Client(clientConfig(s, address, timeoutSeconds, ssl));
    client.on('error', () => undefined);
    const onAbort = () => void client.end().catch(() => undefined);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      await client.connect();
      return client;
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  };
  const mode = s.sslMode ?? 'prefer';
  if (mode === 'disable') return attempt(false);
  if (mode === 'require') return attempt({ rejectUnauthorized: false, ...servername });
  if (mode === 'verify-full') return attempt({ rejectUnauthorized: true, host: s.host, ...servername } as pg.ClientConfig['ssl']);
  try {
    return await attempt({ rejectUnauthorized: false, ...servername });
  } catch (err) {
    if (/does not support SSL/i.test((err as Error).message)) return attempt(false);
    throw err;
  }
}

/** Runs fn on a connection that is closed afterwards, and when `signal` aborts. */
export async function withPostgres<T>(
  s: SourceSettings,
  timeoutSeconds: number,
  egress: EgressPolicy,
  signal: AbortSignal | undefined,
  fn: (c: pg.Client) => Promise<T>,
): Promise<T> {
  const client = await connectPostgres(s, timeoutSeconds, egress, signal);
  const onAbort = () => void client.end().catch(() => undefined);
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    return await fn(client);
  } finally {
    signal?.removeEventListener('abort', onAbort);
    await client.end().catch(() => undefined);
  }
}

const TABLE_TYPES = `('BASE TABLE', 'VIEW', 'FOREIGN')`;

async function schemaExists(c: pg.Client, schema: string): Promise<boolean> {
  return (await c.query('SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1', [schema])).rowCount === 1;
}

/** The connection test: connect, check the schema, count the tables the user can see in it. */
export async function testPostgres(s: SourceSettings, timeoutSeconds: number, egress: EgressPolicy): Promise<string> {
  return withPostgres(s, timeoutSeconds, egress, undefined, async (c) => {
    await setStatementTimeout(c, timeoutSeconds);
    const version = String((await c.query('SHOW server_version')).rows[0].server_version).split(' ')[0];
    if (!(await schemaExists(c, s.schema)))
      throw new SourceError(`Connected to ${where(s)}/${s.database ?? s.username}, but schema "${s.schema}" does not exist`);
    const { rows } = await c.query(
      `SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = $1 AND table_type IN ${TABLE_TYPES}`,
      [s.schema],
    );
    const n = Number(rows[0].n);
    return `Connected to PostgreSQL ${version} at ${where(s)}, database "${s.database ?? s.username}" as "${s.username}": ${plural(n, 'table')} accessible in schema "${s.schema}"`;
  });
}

export interface DiscoveredTable {
  schema: string;
  name: string;
  columns: { name: string; type: string; nullable: boolean }[];
}

/** The schemas a connector reads: its own, and any named in selected_tables. */
const schemasOf = (s: SourceSettings) => [...new Set([s.schema, ...s.selectedTables.map((t) => splitTable(t, s.schema).schema)])];

/**
 * The most tables a connector reads from its source, in a discovery or in a sync of every table:
 * as many as it may select (`x-max-items` of selected_tables). The source belongs to the tenant,
 * which decides how many tables and columns it has: without a bound one discovery could bring
 * millions of columns into memory, into one stored row and into every classification of it.
 */
export const MAX_SOURCE_TABLES = Number(kind('connector').schema.properties!.selected_tables['x-max-items']);
/** The most columns one discovery reads (all tables together). */
export const MAX_DISCOVERED_COLUMNS = 100_000;

const tooMany = (what: string, schemas: string[], max: number, advice: string) =>
  new SourceError(
    `${schemas.length === 1 ? 'Schema' : 'Schemas'} ${schemas.map((x) => `"${x}"`).join(', ')} ${schemas.length === 1 ? 'holds' : 'hold'} more than ${max.toLocaleString('en-US')} ${what}, the most a connector reads; ${advice}`,
  );

/**
 * Columns per FETCH of a discovery. node-postgres parses a whole result in the turn of the event loop
 * that receives it: the 32,000 columns of one query held every tenant's requests for 0.1-0.5 s, and
 * MAX_DISCOVERED_COLUMNS would hold them three times as long. A batch of this size parses in a few
 * milliseconds, and the round trip between batches lets everything else run.
 */
export const DISCOVERY_BATCH_ROWS = 2_000;

type ColumnRow = [table_schema: string, table_name: string, column_name: string, data_type: string, udt_name: string, is_nullable: string];

/** Tables and columns (information_schema) of the connector's schemas that the user can see: at most MAX_SOURCE_TABLES and MAX_DISCOVERED_COLUMNS. */
export async function discoverPostgres(s: SourceSettings, timeoutSeconds: number, egress: EgressPolicy): Promise<DiscoveredTable[]> {
  return withPostgres(s, timeoutSeconds, egress, undefined, async (c) => {
    await setStatementTimeout(c, timeoutSeconds);
    const schemas = schemasOf(s);
    const tables = await c.query<{ table_schema: string; table_name: string }>(
      `SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema = ANY($1) AND table_type IN ${TABLE_TYPES} ORDER BY table_schema, table_name LIMIT $2`,
      [schemas, MAX_SOURCE_TABLES + 1],
    );
    if (tables.rows.length > MAX_SOURCE_TABLES)
      throw tooMany('tables', schemas, MAX_SOURCE_TABLES, 'keep the tables to discover in a schema of their own');
    const byKey = new Map<string, DiscoveredTable>();
    for (const t of tables.rows)
      byKey.set(`${t.table_schema}.${t.table_name}`, { schema: t.table_schema, name: t.table_name, columns: [] });
    const columns = `SELECT table_schema, table_name, column_name, data_type, udt_name, is_nullable FROM information_schema.columns
        WHERE table_schema = ANY($1) ORDER BY table_schema, table_name, ordinal_position LIMIT $2`;
    let read = 0;
    for await (const batch of inBatches<ColumnRow>(c, columns, [schemas, MAX_DISCOVERED_COLUMNS + 1], DISCOVERY_BATCH_ROWS)) {
      read += batch.length;
      if (read > MAX_DISCOVERED_COLUMNS)
        throw tooMany('columns', schemas, MAX_DISCOVERED_COLUMNS, 'keep the tables to discover in a schema of their own');
      for (const [tableSchema, tableName, name, dataType, udtName, nullable] of batch) {
        const table = byKey.get(`${tableSchema}.${tableName}`);
        if (!table) continue;
        const type = dataType === 'ARRAY' || dataType === 'USER-DEFINED' ? udtName : dataType;
        table.columns.push({ name, type, nullable: nullable === 'YES' });
      }
    }
    return [...byKey.values()];
  });
}

/**
 * The rows of one query, `size` at a time, through a cursor of a read-only transaction (one execution
 * of the query, one round trip per batch), as arrays in the select list's order.
 */
async function* inBatches<R extends unknown[]>(c: pg.Client, sql: string, params: unknown[], size: number): AsyncGenerator<R[]> {
  await c.query('BEGIN READ ONLY');
  try {
    await c.query(`DECLARE batches NO SCROLL CURSOR FOR ${sql}`, params);
    for (;;) {
      const { rows } = await c.query<R>({ text: `FETCH ${size} FROM batches`, rowMode: 'array' });
      if (rows.length) yield rows;
      if (rows.length < size) return;
    }
  } finally {
    await c.query('ROLLBACK').catch(() => undefined);
  }
}

/** The tables a sync reads: the selected ones, or, when none are selected, every table of the connector's schema. */
export async function tablesToSync(c: pg.Client, s: SourceSettings): Promise<string[]> {
  if (s.selectedTables.length) return s.selectedTables;
  const { rows } = await c.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_type IN ${TABLE_TYPES} ORDER BY table_name LIMIT $2`,
    [s.schema, MAX_SOURCE_TABLES + 1],
  );
  if (rows.length > MAX_SOURCE_TABLES)
    throw tooMany(
      'tables',
      [s.schema],
      MAX_SOURCE_TABLES,
      `select the tables to sync in selected_tables (at most ${MAX_SOURCE_TABLES.toLocaleString('en-US')})`,
    );
  return rows.map((r) => `${s.schema}.${r.table_name}`);
}

/** SELECT count(*) of one table of the source. */
/** Bounds every following statement on this connection (PostgreSQL cancels it: error 57014). */
export async function setStatementTimeout(c: pg.Client, seconds: number): Promise<void> {
  await c.query(`SET statement_timeout = ${Math.max(1, Math.round(seconds * 1000))}`);
}

export async function countRows(c: pg.Client, s: SourceSettings, table: string): Promise<number> {
  const { schema, table: name } = splitTable(table, s.schema);
  const { rows } = await c.query(`SELECT count(*) AS n FROM ${ident(schema)}.${ident(name)}`);
  return Number(rows[0].n);
}

// ---------------------------------------------------------------------------------------------
// Simulated sources (every type but postgresql)

/** Rows of a simulated table: a hash of its name, so every sync of it reports the same count. */
export const simulatedRows = (table: string) => hash32(`rows:${table}`) % 100_000;

/** Nominal seconds a simulated table takes to sync (at time scale 1): 0.5 s plus 1 s per 50,000 rows. */
export const simulatedSyncSeconds = (table: string) => Math.round((0.5 + simulatedRows(table) / 50_000) * 1000) / 1000;

export function simulatedTest(s: SourceSettings): string {
  const n = s.selectedTables.length;
  return `Simulated ${s.connectorType} source (no real connection is made for this type): ${plural(n, 'table')} accessible`;
}

const SIMULATED_COLUMNS: { name: string; type: string; nullable: boolean }[] = [
  { name: 'name', type: 'character varying', nullable: true },
  { name: 'email', type: 'character varying', nullable: true },
  { name: 'status', type: 'character varying', nullable: false },
  { name: 'amount', type: 'numeric', nullable: true },
  { name: 'created_at', type: 'timestamp with time zone', nullable: false },
  { name: 'updated_at', type: 'timestamp with time zone', nullable: true },
];

/** The simulated source has exactly the selected tables, each with an id and 2-6 hash-chosen columns. */
export function simulatedDiscovery(s: SourceSettings): DiscoveredTable[] {
  return s.selectedTables.map((t) => {
    const { schema, table } = splitTable(t, s.schema);
    const h = hash32(`columns:${t}`);
    const count = 2 + (h % 5);
    return { schema, name: table, columns: [{ name: 'id', type: 'bigint', nullable: false }, ...SIMULATED_COLUMNS.slice(0, count)] };
  });
}
