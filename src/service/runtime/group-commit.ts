import { yieldToLoop } from './slices.js';

/**
 * Group commit: items handed in while a write is running (or in the same turn of the event loop) are
 * written together by the next one. Each `add` resolves once its own write is done, or rejects with
 * that write's error. One write runs at a time.
 *
 * For work that ends in bursts, each end a few rows: on PostgreSQL a transaction per end costs its
 * BEGIN, lock and COMMIT round trips on the same cores as the database, and the ends then wait for
 * one another anyway (an infrastructure apply's changes, 10 in flight).
 */
export class GroupCommit<T> {
  private queue: { item: T; resolve: () => void; reject: (err: unknown) => void }[] = [];
  private writing = false;

  constructor(private readonly write: (items: T[]) => Promise<void>) {}

  add(item: T): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.writing) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.writing = true;
    try {
      while (this.queue.length) {
        await yieldToLoop(); // the items that end in this turn go in the same write
        const batch = this.queue;
        this.queue = [];
        try {
          await this.write(batch.map((b) => b.item));
          for (const b of batch) b.resolve();
        } catch (err) {
          for (const b of batch) b.reject(err);
        }
      }
    } finally {
      this.writing = false;
    }
  }
}
