import { createHmac, timingSafeEqual } from 'node:crypto';
import { invalid } from './errors.js';

export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 100;

/**
 * Opaque, tamper-proof cursors: the position (a row sequence number) and the list it
 * belongs to, signed with the server's key. A forged, garbled or foreign cursor is a
 * validation_error on `cursor`.
 */
export class Cursors {
  constructor(private readonly key: Buffer) {}

  private sign(payload: string) {
    return createHmac('sha256', this.key).update(payload).digest().subarray(0, 16);
  }

  encode(scope: string, afterSeq: number): string {
    const payload = Buffer.from(JSON.stringify({ s: afterSeq, q: scope })).toString('base64url');
    return `${payload}.${this.sign(payload).toString('base64url')}`;
  }

  /** The position a cursor of this scope (or of one of `scopes`: older layouts still read) continues after. */
  decode(scopes: string | readonly string[], cursor: string | undefined): number {
    if (cursor === undefined) return 0;
    const bad = () => invalid('cursor', 'is not a cursor returned by this list; start again without one');
    const [payload, signature, extra] = cursor.split('.');
    if (!payload || !signature || extra !== undefined) throw bad();
    // Compared as text: base64url decoding ignores a last character's spare bits, so comparing
    // decoded bytes would accept a cursor with its final character changed.
    const expected = Buffer.from(this.sign(payload).toString('base64url'));
    const given = Buffer.from(signature);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw bad();
    try {
      const parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { s: unknown; q: unknown };
      if (
        !(typeof scopes === 'string' ? parsed.q === scopes : scopes.includes(parsed.q as string)) ||
        typeof parsed.s !== 'number' ||
        !Number.isInteger(parsed.s)
      )
        throw bad();
      return parsed.s;
    } catch {
      throw bad();
    }
  }
}

export interface Page<T> {
  data: T[];
  next_cursor?: string;
  has_more: boolean;
}

/**
 * The same envelope as serialised JSON bytes, from a page whose items are already JSON text joined
 * by commas (stored resources, ResourceStore.listPage): the hot list path neither parses nor
 * re-serialises them. Bytes, not a string: a string body of ~50 KB would be flattened to be
 * measured, copied again to be joined to the headers, then encoded; this encodes it once.
 * `page.count` is the rows read for a `limit`: more than `limit` when more follow.
 */
export function toJsonPage(
  page: { count: number; lastSeq: number; items: string },
  limit: number,
  scope: string,
  cursors: Cursors,
): Buffer {
  const hasMore = page.count > limit;
  const next = hasMore ? `,"next_cursor":${JSON.stringify(cursors.encode(scope, page.lastSeq))}` : '';
  const head = '{"data":[';
  const tail = `]${next},"has_more":${hasMore}}`;
  const out = Buffer.allocUnsafe(head.length + Buffer.byteLength(page.items) + tail.length);
  let at = out.write(head, 0, 'latin1');
  at += out.write(page.items, at, 'utf8');
  out.write(tail, at, 'latin1');
  return out;
}

/**
 * Rows a filtered list examines per request, at most. A filter that matches little (an action
 * that never happened, a rare severity) would otherwise read a tenant's whole history to fill one
 * page; instead the page ends where the window does, possibly short or empty, with has_more and a
 * cursor to go on from there.
 */
export const SCAN_WINDOW = 10_000;

/**
 * Stored JSON one page holds at most, with at least one item: of runs (ResourceStore.listJsonPageWithin),
 * and of any kind's list in a scope that holds large resources (store/large-scopes.ts).
 */
export const PAGE_BYTES = 8 * 1024 * 1024;

/**
 * Builds the spec's envelope from `limit + 1` rows fetched in sequence order. `scannedTo`: the
 * last sequence number a bounded scan examined (see SCAN_WINDOW), when rows lie beyond it.
 */
export function toPage<R extends { seq: number }, T>(
  rows: R[],
  limit: number,
  scope: string,
  cursors: Cursors,
  map: (r: R) => T,
  scannedTo?: number,
): Page<T> {
  const hasMore = rows.length > limit;
  const pageRows = hasMore ? rows.slice(0, limit) : rows;
  const page: Page<T> = { data: pageRows.map(map), has_more: hasMore || scannedTo !== undefined };
  if (hasMore) page.next_cursor = cursors.encode(scope, pageRows[pageRows.length - 1].seq);
  else if (scannedTo !== undefined) page.next_cursor = cursors.encode(scope, scannedTo);
  return page;
}
