import { describe, expect, it } from 'vitest';
import { LARGE_ITEM_BYTES, LargeScopes, UNMARKED_TTL_MS, isLargeItem } from '../../../src/service/store/large-scopes.js';
import type { Queryable } from '../../../src/service/store/db.js';

/** A store of marks that counts the probes and writes it gets. */
function marksTable() {
  const rows = new Set<string>();
  const calls = { probes: 0, writes: 0 };
  const q = {
    get: async (_sql: string, params: string[]) => {
      calls.probes++;
      return rows.has(params.join('/')) ? { marked: 1 } : undefined;
    },
    run: async (_sql: string, params: string[]) => {
      calls.writes++;
      rows.add(params.join('/'));
      return { changes: 1 };
    },
  } as unknown as Queryable;
  return { rows, calls, q };
}

const scope = { tenantId: 'ten_1', projectId: 'prj_1', kind: 'connector' };

describe('large scopes', () => {
  it('counts UTF-8 bytes, not characters', () => {
    expect(isLargeItem('x'.repeat(LARGE_ITEM_BYTES))).toBe(false);
    expect(isLargeItem('x'.repeat(LARGE_ITEM_BYTES + 1))).toBe(true);
    expect(isLargeItem('é'.repeat(LARGE_ITEM_BYTES / 2 + 1))).toBe(true); // 2 bytes each
  });

  it('asks the database again about an unmarked scope only after the TTL, and never again once marked', async () => {
    let now = 0;
    const marks = new LargeScopes(() => now);
    const { rows, calls, q } = marksTable();
    expect(await marks.isMarked(q, scope)).toBe(false);
    expect(await marks.isMarked(q, scope)).toBe(false);
    expect(calls.probes).toBe(1);
    rows.add('ten_1/prj_1/connector'); // marked by another replica
    now += UNMARKED_TTL_MS - 1;
    expect(await marks.isMarked(q, scope)).toBe(false);
    now += 1;
    expect(await marks.isMarked(q, scope)).toBe(true);
    now += 10 * UNMARKED_TTL_MS;
    expect(await marks.isMarked(q, scope)).toBe(true);
    expect(calls.probes).toBe(2);
  });

  it('knows at once a scope it marked itself, and writes nothing for small resources', async () => {
    const marks = new LargeScopes(() => 0);
    const { calls, q } = marksTable();
    expect(await marks.isMarked(q, scope)).toBe(false);
    await marks.markIfLarge(q, scope, '{}');
    expect(calls.writes).toBe(0);
    await marks.markIfLarge(q, scope, JSON.stringify({ t: 'x'.repeat(LARGE_ITEM_BYTES) }));
    expect(calls.writes).toBe(1);
    expect(await marks.isMarked(q, scope)).toBe(true);
    expect(calls.probes).toBe(1);
  });
});
