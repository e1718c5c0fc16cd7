import type { WebSocket } from 'ws';
import { encodeText, writeTexts, type EncodedText } from './frames.js';

/**
 * Messages are written in batches, each socket's queue in one write. A pipeline's updates come in
 * bursts (a step ends, the next starts, a notification step runs and ends, the next starts: four
 * updates within ~2 ms, a turn of the event loop or two apart), and the fixed cost of a socket
 * write is most of a fan-out: written one by one to 500 sockets, the burst's last update waited
 * for three whole fan-outs before its own (see docs/guides/benchmarks.md). A batch is written
 * after the turn of the event loop that follows its first message, or later while the turn before
 * added messages, for at most BATCH_MAX_TURNS turns and BATCH_MAX_MS. It never waits on a timer:
 * on a busy machine a process that sleeps, even 1 ms, waits for a core again (measured: p50 from
 * 12 to 57 ms with a 1 ms timer at load 10 on 2 cores).
 */
export const BATCH_MAX_TURNS = 4;
export const BATCH_MAX_MS = 3;

/**
 * Bytes a socket may hold unsent before the next batch; past it the connection is terminated. A
 * reader that slow (or stalled while still answering pings) only grew the service's memory, for up
 * to two heartbeats; it reconnects, and a run stream then starts again from a fresh catch-up.
 */
export const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;

/** Told after each batch is written: performance.now() before and after, and the sockets written. */
export type FlushListener = (startedAt: number, endedAt: number, sockets: number) => void;

/**
 * One event goes to many sockets: serialised and framed once (per message object), then queued
 * per socket until the batch is written, each socket's queue at once.
 */
export class Outbox<C extends { socket: WebSocket }> {
  private readonly encoded = new WeakMap<object, EncodedText>();
  private readonly queues = new Map<C, EncodedText[]>();
  private timer: NodeJS.Immediate | undefined;
  private queued = 0;
  private queuedAtLastTurn = 0;
  private turns = 0;
  private firstQueuedAt = 0;

  constructor(private readonly flushed: FlushListener = () => undefined) {}

  /** Queues `msg` for the connection's socket, if it is open; the batch is written on a later turn. */
  send(c: C, msg: object): void {
    if (c.socket.readyState !== c.socket.OPEN) return;
    let text = this.encoded.get(msg);
    if (text === undefined) this.encoded.set(msg, (text = encodeText(msg)));
    const texts = this.queues.get(c);
    if (texts) texts.push(text);
    else this.queues.set(c, [text]);
    this.queued++;
    if (this.timer) return;
    this.firstQueuedAt = performance.now();
    this.timer = setImmediate(this.nextTurn);
  }

  /** Writes what is queued now, to the sockets still open, and cancels the pending turn. */
  flush(): void {
    clearImmediate(this.timer);
    this.timer = undefined;
    this.queued = this.queuedAtLastTurn = this.turns = 0;
    const startedAt = performance.now();
    const joined = new Map<string, Buffer>();
    for (const [c, texts] of this.queues) {
      if (c.socket.readyState !== c.socket.OPEN) continue;
      if (c.socket.bufferedAmount > MAX_BUFFERED_BYTES) c.socket.terminate();
      else writeTexts(c.socket, texts, joined);
    }
    const sockets = this.queues.size;
    this.queues.clear();
    this.flushed(startedAt, performance.now(), sockets);
  }

  private readonly nextTurn = (): void => {
    this.turns++;
    if (
      this.turns < BATCH_MAX_TURNS &&
      (this.turns < 2 || this.queued > this.queuedAtLastTurn) &&
      performance.now() - this.firstQueuedAt < BATCH_MAX_MS
    ) {
      this.queuedAtLastTurn = this.queued;
      this.timer = setImmediate(this.nextTurn);
      return;
    }
    this.flush();
  };
}
