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

  decode(scope: string, cursor: string | undefined): number {
    if (cursor === undefined) return 0;
    const bad = () => invalid('cursor', 'is not a cursor returned by this list; start again without one');
    const [payload, signature, extra] = cursor.split('.');
    if (!payload || !signature || extra !== undefined) throw bad();
    const expected = this.sign(payload);
    const given = Buffer.from(signature, 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw bad();
    try {
      const parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { s: unknown; q: unknown };
      if (parsed.q !== scope || typeof parsed.s !== 'number' || !Number.isInteger(parsed.s)) throw bad();
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

/** Builds the spec's envelope from `limit + 1` rows fetched in sequence order. */
export function toPage<R extends { seq: number }, T>(rows: R[], limit: number, scope: string, cursors: Cursors, map: (r: R) => T): Page<T> {
  const hasMore = rows.length > limit;
  const pageRows = hasMore ? rows.slice(0, limit) : rows;
  const page: Page<T> = { data: pageRows.map(map), has_more: hasMore };
  if (hasMore) page.next_cursor = cursors.encode(scope, pageRows[pageRows.length - 1].seq);
  return page;
}
