import {
  ConfigValidationError,
  declaredLookup,
  firstOf,
  formatConfigError,
  subjectOf,
  type ConfigDocument,
  type ReferenceLookup,
  type ResolvedSecrets,
} from '../config/index.js';
import { toApiBodyShared } from '../config/api-body.js';
import { valuesAt, type HealthStatus, type KindDescriptor, type Operation } from '../kinds/index.js';
import {
  diffResource,
  hasLabels,
  leafChanges,
  LABELS_FIELD,
  MANAGED_BY_LABEL,
  SECRETS_SHA_LABEL,
  SENSITIVE,
  secretsFingerprint,
  secretTopFields,
  type FieldChange,
} from './diff.js';
import { OBSERVE_NOTE, preventDestroyErrors, withoutIgnored } from './policy.js';
import { resourceKey, type LiveResource, type LiveState } from './observe.js';

export type Action = 'create' | 'update' | 'replace' | 'delete' | 'no-op';

/** Which resource an entry of a plan, drift report or adoption is about, and what differs. */
export interface ResourceEntry {
  kind: string;
  yamlKind: string;
  project?: string;
  name: string;
  /** Live id, when the resource exists. */
  id?: string;
  /** Field-level differences (a plan's create: every declared field; delete: none). */
  changes: FieldChange[];
}

export interface PlannedChange extends ResourceEntry {
  action: Action;
  /** Why a replace: the immutable fields, or the replaced resource it depends on. */
  reasons: string[];
  notes: string[];
  /** Set when the service lacks an operation this change needs: it is reported, not applied. */
  unsupported?: string;
  /** owned: labelled by this source; unmanaged: exists, hand-made (updated in place, never pruned); new: to be created. */
  ownership: 'owned' | 'unmanaged' | 'adopted' | 'new' | 'untracked';
  /** Internal (not in JSON output). */
  key: string;
  doc?: ConfigDocument;
  live?: LiveResource;
  /** Top-level fields to PATCH. */
  patchFields: string[];
  /** Labels to write (kinds with labels). */
  labels?: Record<string, string>;
  /** dpctl.dev/reconcile: observe: the change is reported (plan, drift), never applied. */
  observeOnly?: boolean;
  /** Health of the live resource when observed (kinds with x-health rules; see health.ts). */
  health?: HealthStatus;
}

export interface Plan {
  sourceId: string;
  changes: PlannedChange[];
  /** Problems that stop an apply (unresolved references, ownership conflicts, the mass-delete guard). */
  errors: string[];
  warnings: string[];
  /** Live resources labelled as managed by this source. */
  managedCount: number;
  summary: Record<Action | 'unsupported', number>;
}

export interface PlanOptions {
  sourceId: string;
  prune: boolean;
  allowMassDelete: boolean;
  /** Take ownership of existing hand-made resources that the config declares. */
  adopt: boolean;
  /** Plan with the operations the spec documents only (a service run with --strict-spec). */
  specOperations: boolean;
}

export const opsOf = (d: KindDescriptor, specOnly: boolean): Operation[] => (specOnly ? d.specOperations : d.operations);

export const docKey = (doc: ConfigDocument) => resourceKey(doc.descriptor, doc.project, doc.name);

/** `Kind project/name` as printed. */
export const subjectOfChange = (c: Pick<PlannedChange, 'yamlKind' | 'project' | 'name'>) =>
  `${c.yamlKind} ${c.project ? `${c.project}/` : ''}${c.name}`;

export const placeholder = (doc: Pick<ConfigDocument, 'yamlKind' | 'project' | 'name'>) =>
  `(known after apply: ${doc.yamlKind}/${doc.project ? `${doc.project}/` : ''}${doc.name})`;

/** Lookup over live resources: (kind, project name, name) -> id. */
export function liveLookup(state: LiveState, descriptors: Map<string, KindDescriptor>): ReferenceLookup {
  return (kind, project, name) => {
    const d = descriptors.get(kind);
    if (!d) return undefined;
    return state.resources.get(resourceKey(d, project, name))?.object.id;
  };
}

/** The secret values of a document, by API field. */
function secretValues(doc: ConfigDocument, secrets: ResolvedSecrets): { field: string; value: string }[] {
  return doc.secrets.map((s) => ({ field: s.field, value: secrets.get(doc, s.field) ?? '' }));
}

/** A copy of a body with every secret shown as (sensitive). */
function displayBody(doc: ConfigDocument, body: Record<string, unknown>): Record<string, unknown> {
  const out = structuredClone(body);
  for (const s of doc.secrets) {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- walks a secret's path through a JSON body
    let cur: any = out;
    for (let i = 0; i < s.path.length - 1; i++) cur = cur?.[s.path[i]];
    if (cur && typeof cur === 'object') cur[s.path[s.path.length - 1]] = SENSITIVE;
  }
  return out;
}

/**
 * The empty list of a change that has no reasons, notes, fields or changes (most changes of a
 * no-op plan): one frozen array shared by all of them instead of four per resource. Lists are
 * only added to in this file, through addTo(), which gives the change a list of its own first.
 */
const NONE: readonly never[] = Object.freeze([]);
const none = <T>(): T[] => NONE as unknown as T[];

function addTo(change: PlannedChange, list: 'reasons' | 'notes', text: string): void {
  if (change[list] === (NONE as unknown)) change[list] = [];
  change[list].push(text);
}

/**
 * A copy of a flat record, key by key (the same keys, values and order as `{ ...record }`). One
 * PlannedChange per resource keeps its labels: a spread copy to which a key is then added got a
 * hidden class of its own in V8 (~250 bytes per resource at 10,000); copies made key by key share one.
 */
function copyOf(record: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of Object.keys(record)) out[k] = record[k];
  return out;
}

/** Ids this live object references (by the descriptor's reference paths). */
export function liveReferences(r: LiveResource): string[] {
  const out: string[] = [];
  for (const ref of r.descriptor.references)
    for (const { value } of valuesAt(r.object, ref.path)) if (typeof value === 'string') out.push(value);
  return out;
}

/**
 * Plans the whole graph: every declared document against what was observed, by the
 * descriptors' rules, and (with prune) the deletion of managed resources that left the config.
 */
export function makePlan(documents: ConfigDocument[], state: LiveState, secrets: ResolvedSecrets, options: PlanOptions): Plan {
  const descriptors = new Map(documents.map((d) => [d.descriptor.kind, d.descriptor]));
  for (const r of state.resources.values()) descriptors.set(r.descriptor.kind, r.descriptor);
  const plan: Plan = {
    sourceId: options.sourceId,
    changes: [],
    errors: [],
    warnings: [...state.warnings],
    managedCount: 0,
    summary: { create: 0, update: 0, replace: 0, delete: 0, 'no-op': 0, unsupported: 0 },
  };
  // Each document's key, made once: the plan's change keeps it.
  const keys = new Map(documents.map((d) => [d, docKey(d)]));
  const declared = new Map(documents.map((d) => [keys.get(d)!, d]));
  const live = (doc: ConfigDocument) => state.resources.get(keys.get(doc) ?? docKey(doc));
  const lookup = firstOf(
    declaredLookup(documents, (doc) => live(doc)?.object.id ?? placeholder(doc)),
    liveLookup(state, descriptors),
  );

  for (const r of state.resources.values()) {
    if (hasLabels(r.descriptor) && (r.object[LABELS_FIELD] as Record<string, string> | undefined)?.[MANAGED_BY_LABEL] === options.sourceId)
      plan.managedCount++;
  }

  // With undeclared projects allowed, a project must at least exist on the server (and be visible to this credential).
  const declaredProjects = new Set(documents.filter((doc) => doc.descriptor.kind === 'project').map((doc) => doc.name));
  const missingProject = (doc: ConfigDocument) =>
    doc.project !== undefined && !declaredProjects.has(doc.project) && !state.projects.has(doc.project);

  const byKey = new Map<string, PlannedChange>();
  for (const doc of documents) {
    const d = doc.descriptor;
    // dpctl.dev/reconcile: disabled: never planned; still declared, so never pruned either.
    if (doc.policy.reconcile === 'disabled') continue;
    if (missingProject(doc)) {
      const visible = [...state.projects.keys()].sort();
      plan.errors.push(
        formatConfigError({
          code: 'undeclared_project',
          ...doc.location,
          subject: subjectOf(doc),
          field: 'metadata.project',
          message: `no project "${doc.project}" on the server and no Project document declares it (projects this credential sees: ${visible.length ? visible.join(', ') : 'none'})`,
        }),
      );
      continue;
    }
    const ops = opsOf(d, options.specOperations);
    const existing = state.resources.get(keys.get(doc)!);
    // The same key, as one string shared with the live state when the resource exists.
    const key = existing?.key ?? keys.get(doc)!;
    let body: Record<string, unknown>;
    try {
      // Read only (the diff changes nothing): nested parts are shared with the document, not copied.
      body = toApiBodyShared(doc, lookup, secrets);
    } catch (err) {
      if (err instanceof ConfigValidationError) plan.errors.push(...err.errors.map(formatConfigError));
      else plan.errors.push(`${subjectOf(doc)}: ${(err as Error).message}`);
      continue;
    }
    let ownership: PlannedChange['ownership'] = existing ? 'untracked' : 'new';
    let labels: Record<string, string> | undefined;
    if (hasLabels(d)) {
      labels = copyOf(doc.labels);
      const owner = (existing?.object[LABELS_FIELD] as Record<string, string> | undefined)?.[MANAGED_BY_LABEL];
      if (existing && owner !== undefined && owner !== options.sourceId) {
        plan.errors.push(
          `${subjectOf(doc)}${doc.project ? ` (project ${doc.project})` : ''}: managed by another source "${owner}" (label ${MANAGED_BY_LABEL}); not touching it`,
        );
        continue;
      }
      if (!existing || owner === options.sourceId) {
        labels[MANAGED_BY_LABEL] = options.sourceId;
        ownership = existing ? 'owned' : 'new';
      } else if (options.adopt) {
        labels[MANAGED_BY_LABEL] = options.sourceId;
        ownership = 'adopted';
      } else {
        ownership = 'unmanaged';
      }
      if (doc.secrets.length) labels[SECRETS_SHA_LABEL] = secretsFingerprint(key, secretValues(doc, secrets));
      body[LABELS_FIELD] = labels;
    }
    const change: PlannedChange = {
      kind: d.kind,
      yamlKind: doc.yamlKind,
      project: doc.project,
      name: doc.name,
      key,
      doc,
      live: existing,
      id: existing?.object.id,
      reasons: none(),
      notes: none(),
      patchFields: none(),
      action: 'no-op',
      changes: none(),
      ownership,
      labels,
    };
    if (!hasLabels(d) && doc.secrets.length) {
      addTo(
        change,
        'notes',
        `${doc.secrets.map((s) => s.field).join(', ')}: write-only and this kind has no labels to hold a fingerprint, so set on create only (never compared)`,
      );
    }
    if (ownership === 'unmanaged')
      addTo(change, 'notes', 'exists and was not created by dpctl: updated in place, never pruned (--adopt to take ownership)');
    if (!existing) {
      change.action = 'create';
      change.changes = leafChanges([], {}, displayBody(doc, body));
      if (!ops.includes('create')) change.unsupported = `the service has no create for ${d.kind}`;
    } else {
      const diff = diffResource(d, body, existing.object, { clearUndeclared: ownership === 'owned' || ownership === 'adopted' });
      const changes = diff.changes.filter((c) => !c.field.startsWith(`${LABELS_FIELD}.${SECRETS_SHA_LABEL}`));
      const fields = new Set(diff.fields);
      if (hasLabels(d) && doc.secrets.length) {
        const liveSha = (existing.object[LABELS_FIELD] as Record<string, string> | undefined)?.[SECRETS_SHA_LABEL];
        if (liveSha !== labels![SECRETS_SHA_LABEL]) {
          for (const f of secretTopFields(d)) if (body[f] !== undefined) fields.add(f);
          for (const s of doc.secrets) changes.push({ field: s.field, before: SENSITIVE, after: SENSITIVE, sensitive: true });
          addTo(
            change,
            'notes',
            liveSha === undefined
              ? 'secret values cannot be read back and carry no fingerprint yet: they are set again'
              : 'a secret value changed (fingerprint differs)',
          );
        }
        // Only the fingerprint label differs: the labels PATCH carries it.
        if (liveSha !== labels![SECRETS_SHA_LABEL]) fields.add(LABELS_FIELD);
      }
      const kept = withoutIgnored(doc.policy, changes, fields, diff.immutable);
      if (kept.ignored.length) addTo(change, 'notes', `ignoring ${kept.ignored.join(', ')} (dpctl.dev/ignore-fields)`);
      change.changes = kept.changes.length ? kept.changes : none();
      change.patchFields = kept.fields.size ? [...kept.fields] : none();
      if (kept.immutable.length) {
        change.action = 'replace';
        addTo(change, 'reasons', `${kept.immutable.join(', ')} cannot change in place`);
        if (!ops.includes('delete') || !ops.includes('create'))
          change.unsupported = `the service has no ${ops.includes('delete') ? 'create' : 'delete'} for ${d.kind}, so it cannot be replaced`;
      } else if (kept.fields.size) {
        change.action = 'update';
        if (!ops.includes('update')) change.unsupported = `the service has no update for ${d.kind}`;
      }
    }
    if (doc.policy.reconcile === 'observe' && change.action !== 'no-op') {
      change.observeOnly = true;
      addTo(change, 'notes', OBSERVE_NOTE);
    }
    byKey.set(key, change);
    plan.changes.push(change);
  }

  // A replaced resource gets a new id: whatever references the old one is replaced too (delete first, re-create after).
  let grew = true;
  while (grew) {
    grew = false;
    const replacedIds = new Map(plan.changes.filter((c) => c.action === 'replace' && c.id).map((c) => [c.id!, c]));
    if (!replacedIds.size) break;
    for (const [k, r] of state.resources) {
      const refs = liveReferences(r).filter((id) => replacedIds.has(id));
      if (!refs.length) continue;
      const dependent = byKey.get(k);
      for (const id of refs) {
        const target = replacedIds.get(id)!;
        const note = `referenced by ${r.descriptor.yamlKind ?? r.descriptor.kind} ${r.object[r.descriptor.identity]}`;
        if (!target.notes.includes(note)) addTo(target, 'notes', note);
      }
      if (!dependent) {
        for (const id of refs) {
          const target = replacedIds.get(id)!;
          const w = `${subjectOfChange(target)}: ${r.descriptor.yamlKind} ${r.object[r.descriptor.identity]} references it and is not in the config, so deleting it will fail (409)`;
          if (!plan.warnings.includes(w)) plan.warnings.push(w);
        }
        continue;
      }
      if (dependent.action === 'replace') continue;
      dependent.action = 'replace';
      addTo(dependent, 'reasons', `depends on ${refs.map((id) => subjectOfChange(replacedIds.get(id)!)).join(', ')}, which is replaced`);
      const ops = opsOf(dependent.doc!.descriptor, options.specOperations);
      if (!ops.includes('delete') || !ops.includes('create'))
        dependent.unsupported = `the service cannot delete and re-create ${dependent.kind}`;
      grew = true;
    }
  }

  if (options.prune) {
    const deletedProjects = new Set<string>();
    const prunable: LiveResource[] = [];
    for (const [k, r] of state.resources) {
      if (declared.has(k) || !hasLabels(r.descriptor)) continue;
      if ((r.object[LABELS_FIELD] as Record<string, string> | undefined)?.[MANAGED_BY_LABEL] !== options.sourceId) continue;
      prunable.push(r);
      if (r.descriptor.kind === 'project') deletedProjects.add(String(r.object.name));
    }
    let counted = 0;
    for (const r of prunable) {
      counted++;
      if (r.project !== undefined && deletedProjects.has(r.project)) continue; // goes with its project
      const d = r.descriptor;
      const name = String(r.object[d.identity]);
      const change: PlannedChange = {
        action: 'delete',
        kind: d.kind,
        yamlKind: d.yamlKind ?? d.kind,
        project: r.project,
        name,
        id: r.object.id,
        changes: [],
        reasons: ['managed by this source and no longer in the config'],
        notes: [],
        ownership: 'owned',
        key: resourceKey(d, r.project, name),
        live: r,
        patchFields: [],
      };
      if (d.kind === 'project') {
        const inside = [...state.resources.values()].filter((x) => x.project === name);
        const foreign = inside.filter(
          (x) =>
            !hasLabels(x.descriptor) ||
            (x.object[LABELS_FIELD] as Record<string, string> | undefined)?.[MANAGED_BY_LABEL] !== options.sourceId,
        );
        addTo(change, 'notes', `deleting a project deletes everything in it (${inside.length} resource${inside.length === 1 ? '' : 's'})`);
        if (foreign.length)
          plan.warnings.push(
            `${subjectOfChange(change)}: pruning it also deletes ${foreign.length} resource${foreign.length === 1 ? '' : 's'} inside it that this source does not manage: ${foreign.map((x) => `${x.descriptor.yamlKind} ${x.object[x.descriptor.identity]}`).join(', ')}`,
          );
      }
      if (!opsOf(d, options.specOperations).includes('delete')) change.unsupported = `the service has no delete for ${d.kind}`;
      plan.changes.push(change);
    }
    const limit = Math.max(5, Math.floor(plan.managedCount * 0.2));
    if (counted > limit && !options.allowMassDelete) {
      plan.errors.push(
        `refusing to delete ${counted} of ${plan.managedCount} managed resources (more than ${limit}, the larger of 5 and 20%): check the path and --source-id, or pass --allow-mass-delete`,
      );
    }
  }

  for (const c of plan.changes) {
    plan.summary[c.action]++;
    if (c.unsupported) plan.summary.unsupported++;
  }
  plan.errors.push(...preventDestroyErrors(plan));
  return plan;
}

/** True when the plan changes something (unsupported changes count: the platform differs from the config; observe-only ones do not: nothing will change them). */
export const hasChanges = (plan: Plan) => plan.changes.some((c) => c.action !== 'no-op' && !c.observeOnly);
