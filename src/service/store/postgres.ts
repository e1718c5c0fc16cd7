import pg from 'pg';
import { PLAN_EACH_TIME, type Db, type Queryable, type SqlValue } from './db.js';

/** `?` placeholders to `$1, $2, ...` (our SQL never has a literal question mark). */
function renumber(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

/**
 * Each distinct statement is renumbered once and, when it has parameters, sent as a named
 * (prepared) statement: a connection parses and plans it on first use only, so the hot
 * statements (authentication, lists, inserts) skip PostgreSQL's parse and plan each time.
 * The set of statements is fixed by the code (values always go in parameters), so the map stays small.
 * A statement marked with planEachTime (db.ts) goes unnamed: planned with its values each call.
 */
interface Prepared {
  text: string;
  name: string;
}
const cache = new Map<string, Prepared>();
const toPg = (sql: string): Prepared => {
  let out = cache.get(sql);
  if (out === undefined) cache.set(sql, (out = { text: renumber(sql), name: `dp_${cache.size}` }));
  return out;
};
const config = (sql: string, params: SqlValue[]): pg.QueryConfig => {
  const p = toPg(sql);
  if (!params.length) return { text: p.text };
  return sql.startsWith(PLAN_EACH_TIME) ? { text: p.text, values: params } : { name: p.name, text: p.text, values: params };
};

// BIGINT columns (sequences, counters) come back as JS numbers: ours stay far below 2^53.
pg.types.setTypeParser(20, (v) => Number(v));

function queryable(client: pg.Pool | pg.PoolClient): Queryable {
  return {
    async all<T>(sql: string, params: SqlValue[] = []) {
      return (await client.query(config(sql, params))).rows as T[];
    },
    async rows(sql: string, params: SqlValue[] = []) {
      return (await client.query({ ...config(sql, params), rowMode: 'array' })).rows as unknown[][];
    },
    async get<T>(sql: string, params: SqlValue[] = []) {
      return (await client.query(config(sql, params))).rows[0] as T | undefined;
    },
    async run(sql: string, params: SqlValue[] = []) {
      return { changes: (await client.query(config(sql, params))).rowCount ?? 0 };
    },
  };
}

/** Any fixed number: the advisory lock that serialises migrations across replicas. */
const MIGRATION_LOCK = 4242_0001;

/** Connections per service process (DP_PG_POOL_MAX overrides): each request holds at most one at a time. */
const POOL_MAX = Number(process.env.DP_PG_POOL_MAX) > 0 ? Number(process.env.DP_PG_POOL_MAX) : 10;

const ignoreConnectionError = () => undefined;

export async function openPostgres(url: string): Promise<Db> {
  // pipeline: statements issued together on one connection (a transaction's BEGIN and its first
  // statement, or two independent checks) are written at once instead of one round trip each; the
  // server still runs them in order, each with its own result or error, exactly as if awaited in turn.
  // idleTimeoutMillis: a connection idle for 10 s (the driver's default) closed, and with it the
  // statements prepared on it; a quiet minute then costs every request a fresh connect and prepare.
  const pool = new pg.Pool({ connectionString: url, max: POOL_MAX, pipeline: true, idleTimeoutMillis: 120_000 } as pg.PoolConfig);
  // A connection that breaks while idle (a server restart, a failover, pg_terminate_backend) is an
  // 'error' event of the pool, and one that breaks while a transaction holds it between statements
  // is one of the client: unheard, either ended the process, every tenant's requests with it. The
  // pool drops the connection and opens another when asked; a statement on it fails with the reason.
  pool.on('error', ignoreConnectionError);
  // Fail at start-up, not on the first request, when the database is unreachable: saying which
  // setting named it (a bare "connect ECONNREFUSED 127.0.0.1:5432" did not), never its password.
  try {
    (await pool.connect()).release();
  } catch (err) {
    await pool.end().catch(() => undefined);
    const at = new URL(url);
    throw new Error(
      `cannot connect to the PostgreSQL database of --database-url (DP_DATABASE_URL) at ${at.hostname}:${at.port || 5432}${at.pathname}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  return {
    dialect: 'postgres',
    ...queryable(pool),
    write: (sql, params) => queryable(pool).get(sql, params),
    async tx(fn) {
      const client = await pool.connect();
      // A connection broken meanwhile is destroyed on release, not given to the next request.
      let broken: Error | undefined;
      const onError = (err: Error) => (broken = err);
      client.on('error', onError);
      try {
        // BEGIN goes out together with the transaction's first statement (pipelined) instead of one
        // round trip before it. BEGIN fails only on a broken connection, where the statements behind
        // it fail too; it is awaited before COMMIT is sent.
        const begin = client.query('BEGIN');
        begin.catch(() => undefined);
        const result = await fn(queryable(client));
        await begin;
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.off('error', onError);
        client.release(broken);
      }
    },
    async exclusive(fn) {
      const client = await pool.connect();
      try {
        await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
        return await fn();
      } finally {
        await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
        client.release();
      }
    },
    close: () => pool.end(),
  };
}
