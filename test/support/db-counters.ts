import type { Db, Queryable, SqlValue } from '../../src/service/store/db.js';

/**
 * Counters of what a service's database does, for tests that bound the work of a request or a
 * run (rows read, bytes written) instead of timing it. They see every statement, inside
 * transactions too, from the moment they are installed.
 */

/** Applies `wrap` to the database and to every transaction's queryable, once each (SQLite hands every transaction the same one). */
function wrapEvery(db: Db, wrap: (q: Queryable) => void): void {
  const wrapped = new WeakSet<Queryable>();
  const once = (q: Queryable) => {
    if (wrapped.has(q)) return;
    wrapped.add(q);
    wrap(q);
  };
  once(db);
  const tx = db.tx;
  db.tx = <T>(fn: (q: Queryable) => Promise<T>) =>
    tx.call(db, (q) => {
      once(q);
      return fn(q);
    }) as Promise<T>;
}

/** Rows the database returns, in all and in the largest single read (on SQLite, one read holds the event loop). */
export function countRowsRead(db: Db): { rows: number; largest: number } {
  const counter = { rows: 0, largest: 0 };
  const add = (n: number) => {
    counter.rows += n;
    counter.largest = Math.max(counter.largest, n);
  };
  wrapEvery(db, (q) => {
    const { all, rows, get } = q;
    q.all = async <T>(sql: string, params?: SqlValue[]) => {
      const out = (await all.call(q, sql, params)) as T[];
      add(out.length);
      return out;
    };
    q.rows = async (sql, params) => {
      const out = await rows.call(q, sql, params);
      add(out.length);
      return out;
    };
    q.get = async <T>(sql: string, params?: SqlValue[]) => {
      const out = (await get.call(q, sql, params)) as T | undefined;
      if (out) add(1);
      return out;
    };
  });
  return counter;
}

/** Characters of the text parameters of every write (JSON documents, mostly). */
export function countBytesWritten(db: Db): { bytes: number } {
  const counter = { bytes: 0 };
  const add = (params?: SqlValue[]) => {
    for (const p of params ?? []) if (typeof p === 'string') counter.bytes += p.length;
  };
  wrapEvery(db, (q) => {
    const { run, get } = q;
    q.run = (sql, params) => {
      add(params);
      return run.call(q, sql, params);
    };
    // Writes with RETURNING go through get (a create with its schedule row on PostgreSQL).
    q.get = <T>(sql: string, params?: SqlValue[]) => {
      if (/^\s*(INSERT|UPDATE|WITH)/i.test(sql)) add(params);
      return get.call(q, sql, params) as Promise<T | undefined>;
    };
  });
  return counter;
}

/** Statements sent to the database (BEGIN and COMMIT of a transaction not counted): round trips, on PostgreSQL. */
export function countStatements(db: Db, counted: (sql: string, params?: SqlValue[]) => boolean = () => true): { statements: number } {
  const counter = { statements: 0 };
  wrapEvery(db, (q) => {
    for (const method of ['all', 'rows', 'get', 'run'] as const) {
      const original = q[method] as (sql: string, params?: SqlValue[]) => Promise<unknown>;
      (q as unknown as Record<string, unknown>)[method] = (sql: string, params?: SqlValue[]) => {
        if (counted(sql, params)) counter.statements++;
        return original.call(q, sql, params);
      };
    }
  });
  return counter;
}
