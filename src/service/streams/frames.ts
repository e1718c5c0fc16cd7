import { createRequire } from 'node:module';
import type { WebSocket } from 'ws';

/**
 * One stream message written to many sockets: serialised and framed once, then written to each
 * socket as one ready-made WebSocket frame.
 *
 * ws's own `send()` frames every copy again and writes header and payload as two writes under
 * cork/uncork. Fanning one update out to 500 subscribers made enough of that short-lived garbage
 * survive into V8's old generation that incremental marking ran during the fan-outs and doubled
 * the delivery tail (`npm run bench:streams`: p99 over 50 ms in about half the runs before, up to
 * 65 ms; 30-45 ms in eleven of eleven after).
 */
const { Sender } = createRequire(import.meta.url)('ws') as { Sender: { frame(data: Buffer, options: object): Buffer[] } };

export interface EncodedText {
  /** Unique per encoded message (names a sequence of them, see writeTexts). */
  readonly id: number;
  /** The UTF-8 JSON, for `send()`. */
  readonly payload: Buffer;
  /** The same as one unmasked, final text frame (server frames are never masked). */
  readonly frame: Buffer;
}

let lastId = 0;

export function encodeText(message: object): EncodedText {
  const payload = Buffer.from(JSON.stringify(message));
  return {
    id: ++lastId,
    payload,
    frame: Buffer.concat(Sender.frame(payload, { fin: true, opcode: 0x1, mask: false, readOnly: true, rsv1: false })),
  };
}

/** The parts of a ws WebSocket (8.x) that say whether a raw frame may go out now. */
interface WsInternals {
  _socket?: { write(chunk: Buffer): boolean; writable?: boolean };
  _sender?: { _state?: number };
}
/** ws's Sender state when it is not compressing or reading a Blob: its frames go out at once. */
const SENDER_IDLE = 0;

/**
 * Writes the message to an open socket. The ready frame goes straight to the underlying socket
 * when nothing could be queued ahead of it inside ws (no extension negotiated, sender idle):
 * then ws writes its own control frames (ping, close) the same way, one whole frame per write,
 * so frames never interleave. Otherwise, or with a ws whose internals differ, `send()` does it.
 */
export function writeText(socket: WebSocket, text: EncodedText): 'frame' | 'send' {
  return writeTexts(socket, [text]);
}

/**
 * Writes several messages to an open socket, in order, as one write of their frames back to back
 * (one TLS record and one system call instead of one per message: the fixed cost of a socket
 * write is most of a fan-out's time, see docs/guides/benchmarks.md). `joined` caches the
 * concatenation of each sequence (by message ids) across the sockets of one fan-out.
 */
export function writeTexts(socket: WebSocket, texts: readonly EncodedText[], joined?: Map<string, Buffer>): 'frame' | 'send' {
  const ws = socket as unknown as WsInternals;
  if (socket.extensions === '' && ws._sender?._state === SENDER_IDLE && ws._socket?.writable) {
    if (texts.length === 1) {
      ws._socket.write(texts[0].frame);
      return 'frame';
    }
    const key = texts.map((t) => t.id).join(',');
    let frames = joined?.get(key);
    if (!frames) {
      frames = Buffer.concat(texts.map((t) => t.frame));
      joined?.set(key, frames);
    }
    ws._socket.write(frames);
    return 'frame';
  }
  for (const text of texts) socket.send(text.payload, { binary: false, compress: false, fin: true });
  return 'send';
}
