import { afterEach, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { mkdtempSync, renameSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { START_BYTES, WalCheckpointer } from '../../../src/service/store/sqlite-checkpoint.js';
import { openSqlite } from '../../../src/service/store/sqlite.js';
import { testStore } from '../../support/service.js';

/**
 * SQLite's checkpoints ran inside the commit that crossed 1,000 pages of log: that commit, and every
 * tenant's requests behind it, waited 7-9 ms on this machine's disk once every ~330 small
 * transactions. They run in a worker now (store/sqlite-checkpoint.ts), holding the write lock.
 */
describe.skipIf(testStore() !== 'sqlite')('WAL checkpoints off the event loop', () => {
  const dirs: string[] = [];
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  /** A database file with a table, its connection, a checkpointer and a lock like the store's. */
  function setUp() {
    const dir = mkdtempSync(join(tmpdir(), 'dp-ckpt-'));
    dirs.push(dir);
    const path = join(dir, 'db.sqlite');
    const sqlite = new Database(path);
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('synchronous = NORMAL');
    sqlite.exec('CREATE TABLE r (id INTEGER PRIMARY KEY, data TEXT)');
    let tail: Promise<unknown> = Promise.resolve();
    const holdWrites = <T>(fn: () => Promise<T>): Promise<T> => {
      const run = tail.then(fn);
      tail = run.catch(() => undefined);
      return run;
    };
    const checkpointer = new WalCheckpointer(sqlite, path, holdWrites);
    cleanups.push(async () => {
      await checkpointer.close();
      sqlite.close();
    });
    const insert = sqlite.prepare('INSERT INTO r (data) VALUES (?)');
    /** `n` small transactions of 2 rows of 1.5 KB, as the service writes: each noted. */
    const write = (n: number) => {
      for (let i = 0; i < n; i++) {
        sqlite.exec('BEGIN IMMEDIATE');
        insert.run('x'.repeat(1500));
        insert.run('y'.repeat(1500));
        sqlite.exec('COMMIT');
        checkpointer.noteWrite();
      }
    };
    return { path, sqlite, checkpointer, write };
  }

  it('the service connection never checkpoints; a small log starts no worker', async () => {
    const { sqlite, checkpointer, write } = setUp();
    expect(sqlite.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    write(10);
    await checkpointer.tick();
    expect(checkpointer.done).toBe(0);
  });

  it('past START_BYTES the worker checkpoints, and the log stays bounded under continuous writes', async () => {
    const { path, checkpointer, write } = setUp();
    // Rounds of writes, a checkpoint after each (the timer's job, called here): 25 rounds of about
    // 5 MB of log each (every small transaction writes its own pages).
    write(400);
    const oneRound = statSync(`${path}-wal`).size;
    await checkpointer.tick();
    for (let round = 1; round < 25; round++) {
      write(400);
      await checkpointer.tick();
    }
    expect(checkpointer.done).toBeGreaterThanOrEqual(24);
    // Each checkpoint copied the whole log, so each round's writes started it again from the
    // beginning: the file stays one round long, not 25. Racing writes, it grew without end.
    expect(statSync(`${path}-wal`).size).toBeLessThan(oneRound * 1.5);
  });

  it('a worker that fails gives the checkpoints back to SQLite', async () => {
    const { path, sqlite, checkpointer, write } = setUp();
    write(400);
    // The worker opens the file by name: moved away, it cannot (the service's connection keeps its own).
    renameSync(path, `${path}.moved`);
    await checkpointer.tick();
    expect(checkpointer.done).toBe(0);
    expect(sqlite.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
  });

  it('the store uses it: a database written past START_BYTES has its log checkpointed by the worker, and closes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dp-ckpt-'));
    dirs.push(dir);
    const path = join(dir, 'db.sqlite');
    const db = openSqlite(path);
    await db.run('CREATE TABLE r (id INTEGER PRIMARY KEY, data TEXT)');
    for (let i = 0; i < 500; i++) await db.tx((q) => q.run('INSERT INTO r (data) VALUES (?)', ['z'.repeat(3000)]));
    const wal = statSync(`${path}-wal`).size;
    expect(wal).toBeGreaterThan(START_BYTES);
    // Within the interval the worker has copied the log back: the next writes start it again.
    await new Promise((r) => setTimeout(r, 1_500));
    for (let i = 0; i < 500; i++) await db.tx((q) => q.run('INSERT INTO r (data) VALUES (?)', ['z'.repeat(3000)]));
    expect(statSync(`${path}-wal`).size).toBeLessThan(wal * 1.5);
    await db.close();
    const check = new Database(path, { readonly: true });
    expect((check.prepare('SELECT count(*) AS n FROM r').get() as { n: number }).n).toBe(1000);
    check.close();
  });
});
