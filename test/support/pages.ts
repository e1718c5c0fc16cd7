import { expect } from 'vitest';

/** A page of the spec's list envelope. */
export interface ListPage {
  data: { id: string }[];
  has_more: boolean;
  next_cursor?: string;
}

/**
 * Follows a list's cursors from the first page to the last, as a client does: what each page
 * held (its size and has_more) and the ids found. A page that says more follow must give a cursor.
 */
export async function walkPages(
  fetchPage: (cursorQuery: string) => Promise<ListPage>,
): Promise<{ seen: { count: number; hasMore: boolean }[]; found: string[] }> {
  const seen: { count: number; hasMore: boolean }[] = [];
  const found: string[] = [];
  let cursor: string | undefined;
  do {
    const p = await fetchPage(cursor ? `&cursor=${encodeURIComponent(cursor)}` : '');
    seen.push({ count: p.data.length, hasMore: p.has_more });
    found.push(...p.data.map((e) => e.id));
    cursor = p.next_cursor;
    if (p.has_more) expect(cursor).toBeDefined();
  } while (cursor);
  return { seen, found };
}
