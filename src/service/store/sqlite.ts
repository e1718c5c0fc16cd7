import { existsSync, writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import type { Db, Queryable, SqlValue } from './db.js';
import { WalCheckpointer } from './sqlite-checkpoint.js';

/** Serialises async transactions: better-sqlite3 has one connection, so two open transactions would interleave. */
class Mutex {
  private tail: Promise<void> = Promise.resolve();
  async lock<T>(fn: () => Promise<T>): Promise<T> {
    const previous = this.tail;
    let release!: () => void;
    this.tail = new Promise((resolve) => (release = resolve));
    await previous;
    try {
      return await fn();
    } finally {
      release();
    }
  }
}

export function openSqlite(path: string): Db {
  // Created readable by its owner only: it holds every tenant's resources and audit log. SQLite gives
  // its -wal and -shm files the database file's permissions. (An existing file keeps its own.)
  if (!existsSync(path)) writeFileSync(path, '', { mode: 0o600, flag: 'wx' });
  const sqlite = new Database(path);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('busy_timeout = 5000');
  sqlite.pragma('foreign_keys = ON');
  // SQLite's own page cache, at most 64 MiB (the default is 2 MiB): a page of 100 resources spans
  // about 25 database pages, so beyond about 8,000 resources a walk through a list read most pages
  // again from the operating system (pages spread over 10,000 connectors: 67 µs a page before,
  // 54 µs after). The cache fills only with pages actually read.
  sqlite.pragma('cache_size = -65536');
  const statements = new Map<string, Database.Statement>();
  const prepare = (sql: string) => {
    let stmt = statements.get(sql);
    if (!stmt) {
      stmt = sqlite.prepare(sql);
      statements.set(sql, stmt);
    }
    return stmt;
  };
  // Raw statements (rows as arrays) are prepared apart: raw mode is a property of the statement.
  const rawStatements = new Map<string, Database.Statement>();
  const prepareRaw = (sql: string) => {
    let stmt = rawStatements.get(sql);
    if (!stmt) {
      stmt = sqlite.prepare(sql).raw(true);
      rawStatements.set(sql, stmt);
    }
    return stmt;
  };
  const direct: Queryable = {
    async all<T>(sql: string, params: SqlValue[] = []) {
      return prepare(sql).all(...params) as T[];
    },
    async rows(sql: string, params: SqlValue[] = []) {
      return prepareRaw(sql).all(...params) as unknown[][];
    },
    async get<T>(sql: string, params: SqlValue[] = []) {
      return prepare(sql).get(...params) as T | undefined;
    },
    async run(sql: string, params: SqlValue[] = []) {
      const stmt = prepare(sql);
      if (!stmt.reader) return { changes: stmt.run(...params).changes };
      stmt.all(...params);
      return { changes: 0 };
    },
  };
  const writes = new Mutex();
  // WAL checkpoints off the event loop (sqlite-checkpoint.ts); an in-memory database has no log.
  const checkpointer = path === ':memory:' ? undefined : new WalCheckpointer(sqlite, path, (fn) => writes.lock(fn));
  const wrote = <T>(result: T): T => {
    checkpointer?.noteWrite();
    return result;
  };
  return {
    dialect: 'sqlite',
    ...direct,
    // A plain write waits for any open transaction so it is never swept into (or rolled back with) it.
    run: (sql, params) => writes.lock(async () => wrote(await direct.run(sql, params))),
    write: (sql, params) => writes.lock(async () => wrote(await direct.get(sql, params))),
    tx: (fn) =>
      writes.lock(async () => {
        sqlite.exec('BEGIN IMMEDIATE');
        try {
          const result = await fn(direct);
          sqlite.exec('COMMIT');
          return wrote(result);
        } catch (err) {
          if (sqlite.inTransaction) sqlite.exec('ROLLBACK');
          throw err;
        }
      }),
    // One process owns the file; transactions below already take the write lock.
    exclusive: (fn) => fn(),
    async close() {
      await checkpointer?.close();
      await writes.lock(async () => sqlite.close());
    },
  };
}
