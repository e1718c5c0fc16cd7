import { planEachTime, type Db, type Queryable, type SqlValue } from './db.js';

/** Above every `seq` (both stores' sequences stay far below 2^53): the default upper bound of a range. */
const MAX_SEQ = Number.MAX_SAFE_INTEGER;

/** A position in `seq`: a value (bound as a parameter) or an SQL expression (a correlated column, or a subquery with its parameters). */
export type SeqPosition = { value: SqlValue } | { sql: string; params?: SqlValue[] };

/** Conditions (with their parameters, in order) and the ORDER BY that walks them on the scope's index. */
export interface ScopeRange {
  sql: string;
  params: SqlValue[];
  order: string;
}

/**
 * The rows of one scope (equal values in `scope`'s columns) with `seq` strictly between `after`
 * (default: before the first) and `before` (default: past the last), as conditions and an order
 * that the index on (scope columns..., seq) serves, in `direction`.
 *
 * On PostgreSQL the scope is a range of row values, (scope..., seq) between (values..., after) and
 * (values..., before), ordered by those columns: only that index gives the order without sorting,
 * so for a page (a small LIMIT) the plan does not depend on statistics. (For a large OFFSET a sort
 * of the whole scope can still look cheaper to a generic plan: such statements use planEachTime.)
 * With plain equalities, the generic plan of a prepared
 * statement (chosen without the tenant's values) walked the primary key in `seq` order and filtered
 * by tenant: a small tenant beside a large one then read the large one's rows on every call (2.7 ms
 * for 10 rows beside 20,000 connectors, 6.4 ms for a pipeline's 3 runs beside 20,000 runs;
 * test/integration/store/list-plan.test.ts). SQLite keeps the equalities: its planner takes the
 * index for them every time, and it bounds a row-value range by its leading columns only (a late
 * page of 10,000 took 2 ms instead of 30 µs).
 */
export function scopeRange(
  db: Pick<Db, 'dialect'>,
  scope: [column: string, value: SqlValue][],
  bounds: { after?: SeqPosition; before?: SeqPosition } = {},
  direction: 'ASC' | 'DESC' = 'ASC',
): ScopeRange {
  const columns = scope.map(([column]) => column);
  const values = scope.map(([, value]) => value);
  const mark = (p: SeqPosition) => ('sql' in p ? p.sql : '?');
  const param = (p: SeqPosition) => ('sql' in p ? (p.params ?? []) : [p.value]);
  if (db.dialect === 'sqlite') {
    const conditions = columns.map((c) => `${c} = ?`);
    const params = [...values];
    for (const [op, position] of [
      ['>', bounds.after],
      ['<', bounds.before],
    ] as const) {
      if (!position) continue;
      conditions.push(`seq ${op} ${mark(position)}`);
      params.push(...param(position));
    }
    return { sql: conditions.join(' AND '), params, order: `seq ${direction}` };
  }
  const after = bounds.after ?? { value: 0 };
  const before = bounds.before ?? { value: MAX_SEQ };
  const row = `(${[...columns, 'seq'].join(', ')})`;
  const marks = columns.map(() => '?').join(', ');
  return {
    sql: `${row} > (${marks}, ${mark(after)}) AND ${row} < (${marks}, ${mark(before)})`,
    params: [...values, ...param(after), ...values, ...param(before)],
    order: [...columns, 'seq'].map((c) => `${c} ${direction}`).join(', '),
  };
}

/**
 * Where a filtered list's scan window ends: the `seq` of the `window`-th row of `range` in `table`
 * (an index-only walk), or undefined when fewer follow. A filter that matches little would otherwise
 * read the scope to its end for one page, and on SQLite that read holds the event loop of every
 * tenant. Planned with its values: for an OFFSET that large a generic plan may sort the whole scope
 * instead of walking its index.
 */
export async function scanWindowEnd(q: Queryable, table: string, range: ScopeRange, window: number): Promise<number | undefined> {
  const end = await q.get<{ seq: number }>(
    planEachTime(`SELECT seq FROM ${table} WHERE ${range.sql} ORDER BY ${range.order} LIMIT 1 OFFSET ${window - 1}`),
    range.params,
  );
  return end && Number(end.seq);
}
