import type { StoredResource } from '../store/resources.js';
import type { Runtime } from './runtime.js';
import type { DiscoveredSchema } from './connectors.js';

interface Matcher {
  column: RegExp;
  table?: RegExp;
  dataType?: RegExp;
}

interface Classification {
  id: string;
  name: string;
  sensitivity: string;
  matchers: Matcher[];
  masking: string | null;
}

const regex = (pattern: string, anchored = false): RegExp | undefined => {
  try {
    return new RegExp(anchored ? `^(?:${pattern})$` : pattern, 'i');
  } catch {
    return undefined;
  }
};

/**
 * Marks the columns of a discovered schema that the project's classifications match, with the
 * masking method of the first enabled masking policy of that classification. A matcher matches a
 * column when its column_pattern matches the column name, its table_pattern (when given)
 * matches the table name or schema.table, and its data_type (when given) matches the whole type;
 * all are case-insensitive regular expressions (column and table patterns search, data_type is
 * anchored). The first classification (in creation order) that matches wins. Marks are computed
 * on every read and not stored, so they follow classification changes at once.
 */
export async function classifySchema(rt: Runtime, connector: StoredResource, schema: DiscoveredSchema): Promise<DiscoveredSchema> {
  const { tenantId, projectId } = connector;
  const [classRows, policyRows] = await Promise.all([
    rt.ctx.resources.list({ tenantId, projectId, kind: 'classification', limit: 10_000 }),
    rt.ctx.resources.list({ tenantId, projectId, kind: 'masking_policy', limit: 10_000 }),
  ]);
  if (!classRows.length) return schema;
  const classes: Classification[] = classRows.map((c) => {
    const policy = policyRows.find((p) => p.data.enabled !== false && p.data.classification_id === c.id);
    const matchers = ((c.data.column_matchers as { column_pattern: string; table_pattern?: string; data_type?: string }[]) ?? []).flatMap((m): Matcher[] => {
      const column = regex(m.column_pattern);
      const table = m.table_pattern ? regex(m.table_pattern) : undefined;
      const dataType = m.data_type ? regex(m.data_type, true) : undefined;
      if (!column || (m.table_pattern && !table) || (m.data_type && !dataType)) return [];
      return [{ column, table, dataType }];
    });
    return { id: c.id, name: c.name, sensitivity: String(c.data.sensitivity), matchers, masking: policy ? String(policy.data.method) : null };
  });
  return {
    ...schema,
    tables: schema.tables.map((t) => ({
      ...t,
      columns: t.columns.map((col) => {
        const found = classes.find((c) =>
          c.matchers.some((m) => m.column.test(col.name) && (!m.table || m.table.test(t.name) || m.table.test(`${t.schema}.${t.name}`)) && (!m.dataType || m.dataType.test(col.type))),
        );
        return found ? { ...col, classification: found.name, classification_id: found.id, sensitivity: found.sensitivity, masking: found.masking } : col;
      }),
    })),
  };
}
