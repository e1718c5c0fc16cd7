import { planEachTime, type Db, type Queryable, type SqlValue } from './db.js';

/** A position in `seq`: a value (bound as a parameter) or an SQL expression (a correlated column, or a subquery with its parameters). */
export type SeqPosition = { value: SqlValue } | { sql: string; params?: SqlValue[] };

/** Conditions (with their parameters, in order) and the ORDER BY that walks them on the scope's index. */
export interface ScopeRange {
  sql: string;
  params: SqlValue[];
  order: string;
  /** Whether `seq` has an upper bound (`before`): see overRange. */
  bounded: boolean;
}

/**
 * The rows of one scope (equal values in `scope`'s columns) with `seq` strictly between `after`
 * (default: before the first) and `before` (default: past the last), as conditions and an order
 * that the index on (scope columns..., seq) serves, in `direction`. A statement over a range goes
 * through overRange.
 *
 * Two things must hold, whatever the statistics (test/integration/store/list-plan.test.ts):
 * - The scan ends where the scope does, and at `before`. That needs equalities on every scope
 *   column and plain bounds on `seq`: a B-tree ends a scan on a range of row values, (scope...,
 *   seq) between (values..., after) and (values..., before), only when its first column (the
 *   tenant) changes, so every page that reached the end of its scope (a last page, an empty list,
 *   the probe for a next page) read the rest of the tenant's index: 5 ms per list beside 50,000
 *   rows, 2.8 s of a 101,000-resource `dpctl plan`.
 * - No plan walks the primary key in `seq` order filtering by tenant: for a small tenant beside a
 *   large one that read the large one's rows on every call (2.7 ms for 10 rows beside 20,000), and
 *   a late page of a large scope followed by rows of another kind read those (20,000 runs after
 *   the last 50 connectors). With plain equalities on every column the planner sees the order as
 *   `seq` alone, which the primary key gives too, and both generic plans (chosen without the
 *   values) and plans with values picked it. So on PostgreSQL the first column's equality is
 *   written `= ANY(ARRAY[?])`: the planner does not take that column for a constant, so only the
 *   scope's index gives the order without sorting the scope, while the B-tree still takes it for an
 *   equality (the scan still ends at the scope's end).
 * SQLite, without statistics (the service never runs ANALYZE), takes the scope's index for plain
 * equalities every time; planEachTime is only a comment there.
 */
export function scopeRange(
  db: Pick<Db, 'dialect'>,
  scope: [column: string, value: SqlValue][],
  bounds: { after?: SeqPosition; before?: SeqPosition } = {},
  direction: 'ASC' | 'DESC' = 'ASC',
): ScopeRange {
  const mark = (p: SeqPosition) => ('sql' in p ? p.sql : '?');
  const param = (p: SeqPosition) => ('sql' in p ? (p.params ?? []) : [p.value]);
  const equal = (column: string, i: number) => (i === 0 && db.dialect === 'postgres' ? `${column} = ANY(ARRAY[?])` : `${column} = ?`);
  const conditions = scope.map(([column], i) => equal(column, i));
  const params = scope.map(([, value]) => value);
  for (const [op, position] of [
    ['>', bounds.after],
    ['<', bounds.before],
  ] as const) {
    if (!position) continue;
    conditions.push(`seq ${op} ${mark(position)}`);
    params.push(...param(position));
  }
  // PostgreSQL's order names the first column, which it does not take for a constant (see above).
  const ordered = db.dialect === 'postgres' ? [...scope.map(([column]) => column), 'seq'] : ['seq'];
  return { sql: conditions.join(' AND '), params, order: ordered.map((c) => `${c} ${direction}`).join(', '), bounded: !!bounds.before };
}

/**
 * A statement over `range`, prepared unless `seq` has an upper bound. A prepared statement may run
 * with a generic plan (chosen without the values), which for a range can only walk the scope's
 * index or sort what it finds, and a sort of a third of the table (PostgreSQL's guess for `seq > ?`)
 * looks as costly as it is. For `seq > ? AND seq < ?` it guesses 0.5 % of the table, and a generic
 * plan sorted a walk of the primary key over every tenant's rows (20,000 for 4): such statements are
 * planned with their values each time (planEachTime), which costs PostgreSQL a parse and a plan per
 * call, so the plain ones are not (a list's backends cost 340 instead of 180 µs that way).
 */
export function overRange(range: ScopeRange, sql: string): string {
  return range.bounded ? planEachTime(sql) : sql;
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
