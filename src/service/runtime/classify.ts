import { slicer } from './slices.js';
import { compileSafeRegex, type SafeRegex } from '../../kinds/safe-regex.js';
import { kind } from '../../kinds/index.js';
import type { StoredResource } from '../store/resources.js';
import type { Runtime } from './runtime.js';
import type { DiscoveredSchema } from './connectors.js';
import { unprocessable } from '../errors.js';

interface Matcher {
  column: SafeRegex;
  table?: SafeRegex;
  dataType?: SafeRegex;
}

interface ColumnMarks {
  classification: string;
  classification_id: string;
  sensitivity: string;
  masking: string | null;
}

interface Classification {
  id: string;
  name: string;
  sensitivity: string;
  matchers: Matcher[];
  masking: string | null;
}

/**
 * RE2 semantics (linear time), so a stored `(a+)+$` cannot pin the event loop on every read. A
 * pattern saved before patterns were checked with RE2 and that it refuses is skipped.
 */
const regex = (pattern: string, whole = false): SafeRegex | undefined => {
  try {
    return compileSafeRegex(pattern, { whole });
  } catch {
    return undefined;
  }
};

/**
 * Marks the columns of a discovered schema that the project's classifications match, with the
 * masking method of the first enabled masking policy of that classification. A matcher matches a
 * column when its column_pattern matches the column name, its table_pattern (when given)
 * matches the table name or schema.table, and its data_type (when given) matches the whole type;
 * all are case-insensitive RE2 regular expressions (column and table patterns search, data_type
 * must match the whole type). The first classification (in creation order) that matches wins.
 * Marks are computed on every read and not stored, so they follow classification changes at
 * once. A read tests at most MAX_CLASSIFY_TESTS (columns x matchers; over it, 422 before any
 * matching) and matches for at most MAX_CLASSIFY_MS (then 422); compiling and matching yield to the
 * event loop every SLICE_MS, even between two matchers of one column; the read stops when its caller
 * goes away; and a tenant's classifications run one at a time (Runtime.heavyReads): a big schema
 * or many classifications slow only their tenant.
 */
export async function classifySchema(
  rt: Runtime,
  connector: StoredResource,
  schema: DiscoveredSchema,
  signal?: AbortSignal,
): Promise<DiscoveredSchema> {
  const { tenantId, projectId } = connector;
  const [classRows, policyRows] = await Promise.all([
    // Every one of the project's: their count is capped (x-max-per-scope), so this read is bounded.
    rt.ctx.resources.list({ tenantId, projectId, kind: 'classification', limit: kind('classification').maxPerScope! }),
    rt.ctx.resources.list({ tenantId, projectId, kind: 'masking_policy', limit: kind('masking_policy').maxPerScope! }),
  ]);
  if (!classRows.length) return schema;
  assertWithinBudget(schema, classRows);
  // Seconds of work at most, in slices, and one at a time per tenant (tenant-gate.ts).
  return rt.heavyReads.run(tenantId, () => markColumns(schema, classRows, policyRows, new MatchingBudget(signal)));
}

/**
 * Milliseconds of matching one schema read may spend (its turns of the event loop not counted).
 * The test count (MAX_CLASSIFY_TESTS) does not bound the time: one test of `a.{200}c` on a
 * 256-character name costs 0.65 ms, so 18,000 tests took 11.8 s and 9.9 million would take hours.
 */
export const MAX_CLASSIFY_MS = 10_000;

/**
 * The pause between tests of one read: a turn of the event loop every SLICE_MS (between columns
 * alone, 3,600 matchers on one column held every tenant 10.6 s), the read's time budget, and its
 * caller going away (an abandoned read went on for minutes of CPU).
 */
class MatchingBudget {
  private readonly pause = slicer();
  private spent = 0;
  private since = performance.now();

  constructor(private readonly signal?: AbortSignal) {}

  /** Undefined (go on) or a turn to await; throws when the budget is spent or the caller left. */
  step(): Promise<void> | undefined {
    const turn = this.pause();
    if (!turn) return undefined;
    this.spent += performance.now() - this.since;
    this.signal?.throwIfAborted();
    if (this.spent > MAX_CLASSIFY_MS)
      throw unprocessable(
        `Classifying this schema took more than ${MAX_CLASSIFY_MS / 1000} s of matching, the limit of one read; ` +
          "make the classifications' patterns simpler (long counted repetitions such as .{200} are the costly part), fewer, or select fewer tables",
      );
    return turn.then(() => {
      this.signal?.throwIfAborted();
      this.since = performance.now();
    });
  }
}

type Table = DiscoveredSchema['tables'][number];

/**
 * Whether a table passes a matcher's table_pattern (name, or schema.name), once per table and
 * matcher: it was tested again for every column of the table.
 */
function tableMatcher() {
  let current: Table | undefined;
  const known = new Map<Matcher, boolean>();
  return (m: Matcher, t: Table): boolean => {
    if (!m.table) return true;
    if (t !== current) {
      current = t;
      known.clear();
    }
    let hit = known.get(m);
    if (hit === undefined) known.set(m, (hit = m.table.test(t.name) || m.table.test(`${t.schema}.${t.name}`)));
    return hit;
  };
}

/** The first classification (in creation order) with a matcher that matches the column, or undefined. */
async function classificationOf(
  classes: Classification[],
  t: Table,
  col: Table['columns'][number],
  tableMatches: ReturnType<typeof tableMatcher>,
  budget: MatchingBudget,
): Promise<Classification | undefined> {
  for (const c of classes)
    for (const m of c.matchers) {
      const turn = budget.step();
      if (turn) await turn;
      if (m.column.test(col.name) && tableMatches(m, t) && (!m.dataType || m.dataType.test(col.type))) return c;
    }
  return undefined;
}

async function markColumns(
  schema: DiscoveredSchema,
  classRows: StoredResource[],
  policyRows: StoredResource[],
  budget: MatchingBudget,
): Promise<DiscoveredSchema> {
  const pause = slicer();
  // The first enabled policy of each classification, in creation order: one pass, not one per classification.
  const policyOf = new Map<string, StoredResource>();
  for (const p of policyRows) {
    const classificationId = String(p.data.classification_id);
    if (p.data.enabled !== false && !policyOf.has(classificationId)) policyOf.set(classificationId, p);
  }
  const classes: Classification[] = [];
  for (const c of classRows) {
    await pause();
    const policy = policyOf.get(c.id);
    classes.push({
      id: c.id,
      name: c.name,
      sensitivity: String(c.data.sensitivity),
      matchers: compileMatchers(c),
      masking: policy ? String(policy.data.method) : null,
    });
  }
  const tableMatches = tableMatcher();
  const tables: DiscoveredSchema['tables'] = [];
  for (const t of schema.tables) {
    // The marks are extra response fields that the stored column type does not have.
    const columns: ((typeof t.columns)[number] & Partial<ColumnMarks>)[] = [];
    for (const col of t.columns) {
      const found = await classificationOf(classes, t, col, tableMatches, budget);
      columns.push(
        found
          ? { ...col, classification: found.name, classification_id: found.id, sensitivity: found.sensitivity, masking: found.masking }
          : col,
      );
    }
    tables.push({ ...t, columns });
  }
  return { ...schema, tables };
}

/**
 * Column-matcher tests one schema read may make (columns x the project's matchers): about 6 s of
 * CPU, in slices. Both factors are the tenant's (100,000 columns from its source, 1,000
 * classifications of 100 matchers), and their product unbounded was hours of CPU for one read.
 */
export const MAX_CLASSIFY_TESTS = 10_000_000;

function assertWithinBudget(schema: DiscoveredSchema, classRows: StoredResource[]) {
  let columns = 0;
  for (const t of schema.tables) columns += t.columns.length;
  let matchers = 0;
  for (const c of classRows) matchers += (c.data.column_matchers as unknown[] | undefined)?.length ?? 0;
  if (columns * matchers <= MAX_CLASSIFY_TESTS) return;
  const n = (x: number) => x.toLocaleString('en-US');
  throw unprocessable(
    `Classifying this schema would test ${n(columns)} columns against ${n(matchers)} column matchers (${n(columns * matchers)} tests), more than the ${n(MAX_CLASSIFY_TESTS)} one read may make; ` +
      "select fewer tables in the connector's schema, or merge the project's classifications",
  );
}

/** A classification's matchers; one with a pattern that does not compile never matches. */
function compileMatchers(c: StoredResource): Matcher[] {
  const stored = (c.data.column_matchers as { column_pattern: string; table_pattern?: string; data_type?: string }[] | undefined) ?? [];
  return stored.flatMap((m): Matcher[] => {
    const column = regex(m.column_pattern);
    const table = m.table_pattern ? regex(m.table_pattern) : undefined;
    const dataType = m.data_type ? regex(m.data_type, true) : undefined;
    if (!column || (m.table_pattern && !table) || (m.data_type && !dataType)) return [];
    return [{ column, table, dataType }];
  });
}
