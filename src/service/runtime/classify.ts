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
 * matching), compiling and matching yield to the event loop every SLICE_MS, and a tenant's
 * classifications run one at a time (Runtime.heavyReads): a big schema or many classifications
 * slow only their tenant.
 */
export async function classifySchema(rt: Runtime, connector: StoredResource, schema: DiscoveredSchema): Promise<DiscoveredSchema> {
  const { tenantId, projectId } = connector;
  const [classRows, policyRows] = await Promise.all([
    // Every one of the project's: their count is capped (x-max-per-scope), so this read is bounded.
    rt.ctx.resources.list({ tenantId, projectId, kind: 'classification', limit: kind('classification').maxPerScope! }),
    rt.ctx.resources.list({ tenantId, projectId, kind: 'masking_policy', limit: kind('masking_policy').maxPerScope! }),
  ]);
  if (!classRows.length) return schema;
  assertWithinBudget(schema, classRows);
  // Seconds of work at most, in slices, and one at a time per tenant (tenant-gate.ts).
  return rt.heavyReads.run(tenantId, () => markColumns(schema, classRows, policyRows));
}

async function markColumns(schema: DiscoveredSchema, classRows: StoredResource[], policyRows: StoredResource[]): Promise<DiscoveredSchema> {
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
  const tables: DiscoveredSchema['tables'] = [];
  for (const t of schema.tables) {
    // The marks are extra response fields that the stored column type does not have.
    const columns: ((typeof t.columns)[number] & Partial<ColumnMarks>)[] = [];
    for (const col of t.columns) {
      await pause();
      const found = classes.find((c) =>
        c.matchers.some(
          (m) =>
            m.column.test(col.name) &&
            (!m.table || m.table.test(t.name) || m.table.test(`${t.schema}.${t.name}`)) &&
            (!m.dataType || m.dataType.test(col.type)),
        ),
      );
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
