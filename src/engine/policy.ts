import { isIgnored, type ResourcePolicy } from '../config/index.js';
import { deleteAt, setAt, valuesAt } from '../kinds/index.js';
import type { FieldChange } from './diff.js';
import { subjectOfChange, type Plan, type PlannedChange } from './plan.js';
import type { Problem } from './problems.js';

/**
 * The per-resource policies of a document (`metadata.annotations`, config/policies.ts) in a
 * plan and an apply: ignored fields leave the diff and keep their live value in a PATCH;
 * observe-only changes are reported and never applied; prevent-destroy fails a plan that
 * would delete or replace the resource.
 */

const topOf = (field: string) => field.split(/[.[]/)[0];

/** The diff without the ignored fields: a top-level field none of whose changes is left is not patched. */
export function withoutIgnored(policy: ResourcePolicy, changes: FieldChange[], fields: Set<string>, immutable: string[]) {
  if (!policy.ignoreFields.length) return { changes, fields, immutable, ignored: [] as string[] };
  const ignored = changes.filter((c) => isIgnored(policy, c.field));
  const kept = changes.filter((c) => !isIgnored(policy, c.field));
  const touched = new Set(ignored.map((c) => topOf(c.field)));
  const keptFields = new Set([...fields].filter((f) => !touched.has(f) || kept.some((c) => topOf(c.field) === f)));
  return {
    changes: kept,
    fields: keptFields,
    immutable: immutable.filter((f) => !isIgnored(policy, f)),
    ignored: ignored.map((c) => c.field),
  };
}

/**
 * A PATCH value of a top-level field with the ignored paths under it set back to the live
 * values, so that sending the rest of the field does not overwrite what is ignored.
 */
export function keepIgnoredLive(policy: ResourcePolicy, field: string, value: unknown, live: Record<string, unknown>): unknown {
  const under = policy.ignoreFields.filter((parts) => parts[0] === field && parts.length > 1);
  if (!under.length || !value || typeof value !== 'object') return value;
  const out = { [field]: structuredClone(value) } as Record<string, unknown>;
  for (const parts of under) {
    const [found] = valuesAt(live, parts);
    if (found === undefined) deleteAt(out, parts);
    else setAt(out, parts, structuredClone(found.value));
  }
  return out[field];
}

export const OBSERVE_NOTE = 'observe only (dpctl.dev/reconcile: observe): reported, never applied';

/** Errors of changes that would delete or replace a resource whose document sets prevent-destroy. */
export function preventDestroyErrors(plan: Plan): Problem[] {
  return plan.changes
    .filter((c: PlannedChange) => c.doc?.policy.preventDestroy && (c.action === 'delete' || c.action === 'replace'))
    .map((c) => ({
      code: 'prevent_destroy',
      ...c.doc!.location, // where the annotation's document is: a user edits it there
      subject: subjectOfChange(c),
      message: `dpctl.dev/prevent-destroy is "true" and this plan would ${c.action} it (${c.reasons.join('; ') || 'no reason given'}); nothing is applied: change the configuration, or remove the annotation to allow it`,
    }));
}
