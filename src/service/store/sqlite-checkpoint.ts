import { stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';

/**
 * WAL checkpoints of the service's SQLite file, in a worker thread instead of on the event loop.
 *
 * SQLite copies the write-ahead log back into the database (and syncs it) every 1,000 pages by
 * default, inside the commit that crosses the mark: with better-sqlite3 that commit, and so every
 * tenant's requests, waited 7-9 ms on this machine's disk once every ~330 small transactions (and
 * longer on slower disks). Here the service's connection never checkpoints (`wal_autocheckpoint =
 * 0`); once the log has grown past START_BYTES, a worker with its own connection does, at most every
 * INTERVAL_MS while there were writes. It runs holding the service's write lock (`holdWrites`):
 * reads go on meanwhile, writes wait those milliseconds without blocking the event loop, and the
 * checkpoint, with no write beside it, copies the whole log, so the next write starts it again
 * from the beginning (a checkpoint racing writes never catches up: the log grew without end).
 * A small database never starts the worker; if the worker cannot start or fails, SQLite's own
 * checkpoints come back.
 */
export const START_BYTES = 1024 * 1024;
export const INTERVAL_MS = 500;

/** The worker: its own connection, one PASSIVE checkpoint per message. CommonJS, given the driver's path. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true });
db.pragma('busy_timeout = 1000');
parentPort.on('message', (message) => {
  if (message === 'close') { db.close(); parentPort.postMessage({ closed: true }); return; }
  try { parentPort.postMessage(db.pragma('wal_checkpoint(PASSIVE)')[0]); }
  catch (err) { parentPort.postMessage({ error: String(err && err.message || err) }); }
});`;

interface CheckpointResult {
  busy?: number;
  log?: number;
  checkpointed?: number;
  error?: string;
  closed?: boolean;
}

export class WalCheckpointer {
  private worker?: Worker;
  private timer?: NodeJS.Timeout;
  private wrote = false;
  private running?: Promise<unknown>;
  private stopped = false;
  /** Checkpoints done by the worker (tests, metrics). */
  done = 0;

  constructor(
    private readonly sqlite: Database.Database,
    private readonly path: string,
    /** Runs `fn` holding the connection's write lock. */
    private readonly holdWrites: <T>(fn: () => Promise<T>) => Promise<T>,
  ) {
    sqlite.pragma('wal_autocheckpoint = 0');
    this.timer = setInterval(() => void this.tick(), INTERVAL_MS);
    this.timer.unref();
  }

  /** A write committed: the log has pages to copy back. */
  noteWrite(): void {
    this.wrote = true;
  }

  /** One look: a checkpoint if there were writes and the log is past START_BYTES (or the worker runs already). */
  async tick(): Promise<void> {
    if (!this.wrote || this.running || this.stopped) return;
    if (!this.worker && (await walBytes(this.path)) < START_BYTES) return;
    this.wrote = false;
    this.running = this.holdWrites(() => this.checkpoint())
      .catch(() => this.fallBack())
      .finally(() => (this.running = undefined));
    await this.running;
  }

  private checkpoint(): Promise<CheckpointResult> {
    const worker = (this.worker ??= this.startWorker());
    return new Promise((resolve, reject) => {
      const onMessage = (result: CheckpointResult) => {
        worker.off('error', reject);
        if (result.error) reject(new Error(result.error));
        else {
          this.done++;
          resolve(result);
        }
      };
      worker.once('message', onMessage);
      worker.once('error', reject);
      worker.postMessage('checkpoint');
    });
  }

  private startWorker(): Worker {
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { driver, path: this.path } });
    worker.unref();
    return worker;
  }

  /** The worker failed: SQLite checkpoints in the commits again, as before. */
  private fallBack(): void {
    void this.halt()?.terminate();
    if (this.sqlite.open) this.sqlite.pragma('wal_autocheckpoint = 1000');
  }

  /** No more looks; the worker, if any, handed over to be ended. */
  private halt(): Worker | undefined {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    const worker = this.worker;
    this.worker = undefined;
    return worker;
  }

  /** Before the connection closes: the worker closes its own first (the last connection to close checkpoints the log). */
  async close(): Promise<void> {
    const running = this.running;
    const worker = this.halt();
    await running;
    if (!worker) return;
    await new Promise<void>((resolve) => {
      worker.once('message', () => resolve());
      worker.once('error', () => resolve());
      worker.postMessage('close');
    });
    await worker.terminate();
  }
}

const walBytes = (path: string) =>
  stat(`${path}-wal`).then(
    (s) => s.size,
    () => 0,
  );
