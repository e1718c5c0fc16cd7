import type { Problem } from './problems.js';
import type { ConfigDocument } from '../config/index.js';
import { docKey, subjectOfChange, type Plan, type PlannedChange } from './plan.js';
import { resourceKey } from './observe.js';
import { KINDS, SCOPE_CONTAINER } from '../kinds/index.js';

/**
 * `--target Kind/project/name` (tenant-level kinds: `Kind/name`), as `terraform -target`: the
 * plan keeps the targeted resources and what they need (their project, what they reference,
 * transitively), plus what a targeted replace drags along. Everything is still observed and
 * planned, so the configuration's errors still count.
 */

export interface Target {
  yamlKind: string;
  project?: string;
  name: string;
  text: string;
}

export function parseTarget(text: string): Target {
  const parts = text.split('/');
  const kind = [...KINDS.values()].find((d) => d.yamlKind?.toLowerCase() === parts[0]?.toLowerCase());
  if (!kind?.yamlKind || parts.some((p) => !p))
    throw new Error(
      `--target ${JSON.stringify(text)}: expected Kind/project/name, or Kind/name for a tenant-level kind (e.g. Connector/analytics/orders-db)`,
    );
  const scoped = kind.scope === 'project';
  if (parts.length !== (scoped ? 3 : 2))
    throw new Error(`--target ${JSON.stringify(text)}: a ${kind.yamlKind} is named ${scoped ? 'Kind/project/name' : 'Kind/name'}`);
  return scoped ? { yamlKind: kind.yamlKind, project: parts[1], name: parts[2], text } : { yamlKind: kind.yamlKind, name: parts[1], text };
}

const targetKey = (t: Target) => {
  const d = [...KINDS.values()].find((k) => k.yamlKind === t.yamlKind)!;
  return resourceKey(d, t.project, t.name);
};

/** The keys of the targets and of everything they need, through projects and references. */
function closure(documents: ConfigDocument[], roots: Set<string>): Set<string> {
  const byKey = new Map(documents.map((d) => [docKey(d), d]));
  const byKindName = new Map(documents.map((d) => [`${d.descriptor.kind}\u0000${d.project ?? ''}\u0000${d.name}`, d]));
  const projectDoc = (name: string) => byKindName.get(`${SCOPE_CONTAINER.kind}\u0000\u0000${name}`);
  const out = new Set<string>();
  const stack = [...roots];
  while (stack.length) {
    const key = stack.pop()!;
    if (out.has(key)) continue;
    out.add(key);
    const doc = byKey.get(key);
    if (!doc) continue;
    const needs = [
      doc.project !== undefined ? projectDoc(doc.project) : undefined,
      ...doc.references.map(
        (r) => byKindName.get(`${r.kind}\u0000${doc.project ?? ''}\u0000${r.name}`) ?? byKindName.get(`${r.kind}\u0000\u0000${r.name}`),
      ),
    ];
    for (const d of needs) if (d) stack.push(docKey(d));
  }
  return out;
}

/** The plan limited to the targets; a target that matches nothing is an error of the plan. */
export function restrictToTargets(plan: Plan, documents: ConfigDocument[], targets: Target[]): Plan {
  if (!targets.length) return plan;
  const roots = new Set(targets.map(targetKey));
  const keep = closure(documents, roots);
  // A targeted replace re-creates what depends on it: those go too (their reasons say so).
  const replaced = plan.changes.filter((c) => c.action === 'replace' && roots.has(c.key)).map((c) => subjectOfChange(c));
  const dragged = (c: PlannedChange) => c.action === 'replace' && c.reasons.some((r) => replaced.some((s) => r.includes(s)));
  const changes = plan.changes.filter((c) => keep.has(c.key) || dragged(c));
  const known = new Set(plan.changes.map((c) => c.key));
  const errors = [
    ...plan.errors,
    ...targets
      .filter((t) => !known.has(targetKey(t)))
      .map((t): Problem => ({
        code: 'unknown_target',
        subject: `--target ${t.text}`,
        message: 'no such resource in the configuration or among the managed resources planned for deletion',
      })),
  ];
  const summary = { create: 0, update: 0, replace: 0, delete: 0, 'no-op': 0, unsupported: 0 };
  for (const c of changes) {
    summary[c.action]++;
    if (c.unsupported) summary.unsupported++;
  }
  return {
    ...plan,
    changes,
    errors,
    summary,
    warnings: [
      ...plan.warnings,
      `planned for ${targets.map((t) => t.text).join(', ')} only (--target): the rest of the configuration may differ from the platform`,
    ],
  };
}
