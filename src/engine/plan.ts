import { appendTo, groupsOnFirstUse, pushAll } from '../collections.js';
import { ITEMS_PER_STEP, runSteps, runStepsInTurns, type Steps } from '../steps.js';
import {
  ConfigValidationError,
  declaredLookup,
  firstOf,
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
  labelOf,
  leafChanges,
  LABELS_FIELD,
  MANAGED_BY_LABEL,
  ownerOf,
  SECRETS_SHA_LABEL,
  SENSITIVE,
  secretTopFields,
  type FieldChange,
} from './diff.js';
import { OBSERVE_NOTE, preventDestroyErrors, withoutIgnored } from './policy.js';
import type { Problem } from './problems.js';
import { nestUnderProjectConflicts, type OwnershipConflict } from './conflicts.js';
import { resourceKey, type LiveResource, type LiveState } from './observe.js';
import { fingerprintFor, isKeyed, unkeyedFingerprintWarning } from './fingerprint.js';

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
  errors: Problem[];
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
  /**
   * The source id was not given but taken from the config directory's name: every repository
   * keeping its YAML in `platform/` gets the same one, and another's projects look like its own.
   * Pruning a whole project then needs the id given (`--source-id`).
   */
  sourceIdDefaulted?: boolean;
  /** Keys the secrets fingerprints (DPCTL_FINGERPRINT_KEY; see fingerprint.ts). */
  fingerprintKey?: string;
}

export const opsOf = (d: KindDescriptor, specOnly: boolean): Operation[] => (specOnly ? d.specOperations : d.operations);

const docKeys = new WeakMap<ConfigDocument, string>();

/**
 * A document's resource key (`resourceKey`), made once per document: the plan, the drift report
 * and the apply each ask it of every document, and each time it was a new string (100,000 of them,
 * about 100 ms a pass).
 */
export function docKey(doc: ConfigDocument): string {
  let key = docKeys.get(doc);
  if (key === undefined) docKeys.set(doc, (key = resourceKey(doc.descriptor, doc.project, doc.name)));
  return key;
}

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
  const values = doc.secrets.map((s) => ({ field: s.field, value: secrets.get(doc, s.field) ?? '' }));
  // dpctl.dev/secrets-version: a new value is a new fingerprint, so the secrets are sent again.
  const version = doc.policy.secretsVersion;
  return version === undefined ? values : [...values, { field: '(secrets-version)', value: version }];
}

/** A copy of a body with every secret, and the fingerprint of the secrets, shown as (sensitive). */
function displayBody(doc: ConfigDocument, body: Record<string, unknown>): Record<string, unknown> {
  const out = structuredClone(body);
  const labels = out[LABELS_FIELD] as Record<string, string> | undefined;
  // An unkeyed fingerprint lets whoever reads the plan (a PR comment) test guesses of the secrets.
  if (labels?.[SECRETS_SHA_LABEL] !== undefined) labels[SECRETS_SHA_LABEL] = SENSITIVE;
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
/** `MaskingPolicy by-hand`: a live resource as warnings and notes name it (its project said apart). */
const kindAndName = (r: LiveResource) => `${r.descriptor.yamlKind ?? r.descriptor.kind} ${String(r.object[r.descriptor.identity])}`;

export function liveReferences(r: LiveResource): string[] {
  const out: string[] = [];
  for (const ref of r.descriptor.references)
    for (const { value } of valuesAt(r.object, ref.path)) if (typeof value === 'string') out.push(value);
  return out;
}

/** What every phase of a plan reads: the inputs and how references resolve (each document's key is `docKey`'s, made once). */
export interface PlanContext {
  state: LiveState;
  secrets: ResolvedSecrets;
  options: PlanOptions;
  /** Declared, then live: a reference to a resource not created yet resolves to a placeholder. */
  lookup: ReferenceLookup;
  /** Names of the projects a Project document declares. */
  declaredProjects: Set<string>;
}

export function planContext(documents: ConfigDocument[], state: LiveState, secrets: ResolvedSecrets, options: PlanOptions): PlanContext {
  const descriptors = new Map(documents.map((d) => [d.descriptor.kind, d.descriptor]));
  for (const r of state.resources.values()) descriptors.set(r.descriptor.kind, r.descriptor);
  const live = (doc: ConfigDocument) => state.resources.get(docKey(doc));
  const lookup = firstOf(
    declaredLookup(documents, (doc) => live(doc)?.object.id ?? placeholder(doc)),
    liveLookup(state, descriptors),
  );
  const declaredProjects = new Set(documents.filter((doc) => doc.descriptor.scopeContainer).map((doc) => doc.name));
  return { state, secrets, options, lookup, declaredProjects };
}

/** How many live resources are labelled as managed by this source. */
export function countManaged(state: LiveState, sourceId: string): number {
  let count = 0;
  for (const r of state.resources.values()) if (hasLabels(r.descriptor) && ownerOf(r) === sourceId) count++;
  return count;
}

/**
 * With undeclared projects allowed, a project must at least exist on the server (and be visible to
 * this credential): the error when it does not.
 */
export function missingProjectError(doc: ConfigDocument, ctx: Pick<PlanContext, 'state' | 'declaredProjects'>): Problem | undefined {
  const { state } = ctx;
  if (doc.project === undefined || ctx.declaredProjects.has(doc.project) || state.projects.has(doc.project)) return undefined;
  const visible = [...state.projects.keys()].sort();
  return {
    code: 'undeclared_project',
    ...doc.location,
    subject: subjectOf(doc),
    field: 'metadata.project',
    message: `no project "${doc.project}" on the server and no Project document declares it (projects this credential sees: ${visible.length ? visible.join(', ') : 'none'})`,
  };
}

/** The body a document asks for, references resolved, or why it cannot be built. */
function documentBody(doc: ConfigDocument, ctx: PlanContext): { body: Record<string, unknown> } | { errors: Problem[] } {
  try {
    // Read only (the diff changes nothing): nested parts are shared with the document, not copied.
    return { body: toApiBodyShared(doc, ctx.lookup, ctx.secrets) };
  } catch (err) {
    if (err instanceof ConfigValidationError) return { errors: err.errors };
    return { errors: [{ code: 'invalid_resource', ...doc.location, subject: subjectOf(doc), message: (err as Error).message }] };
  }
}

/** Who owns a declared resource, and the labels to write (kinds with labels). */
export interface Ownership {
  ownership: PlannedChange['ownership'];
  labels?: Record<string, string>;
}

/**
 * Ownership of a declared resource by its live labels: new or owned (labelled by this source),
 * adopted (--adopt), unmanaged (hand-made, left unlabelled), untracked (a kind without labels);
 * a conflict when another source manages it.
 */
export function ownershipOf(
  doc: ConfigDocument,
  existing: LiveResource | undefined,
  options: Pick<PlanOptions, 'sourceId' | 'adopt'>,
): Ownership | { conflict: Problem } {
  if (!hasLabels(doc.descriptor)) return { ownership: existing ? 'untracked' : 'new' };
  const labels = copyOf(doc.labels);
  const owner = ownerOf(existing);
  if (existing && owner !== undefined && owner !== options.sourceId) {
    return {
      conflict: {
        code: 'ownership_conflict',
        ...doc.location,
        subject: `${subjectOf(doc)}${doc.project ? ` (project ${doc.project})` : ''}`,
        // The source id defaults to the directory's name: planning one file of a repository, or a
        // copy under another name, meets its own resources as another source's.
        message: `managed by another source "${owner}" (label ${MANAGED_BY_LABEL}); not touching it (if this configuration is that source, pass --source-id ${owner})`,
      },
    };
  }
  if (!existing || owner === options.sourceId) {
    labels[MANAGED_BY_LABEL] = options.sourceId;
    return { ownership: existing ? 'owned' : 'new', labels };
  }
  if (options.adopt) {
    labels[MANAGED_BY_LABEL] = options.sourceId;
    return { ownership: 'adopted', labels };
  }
  return { ownership: 'unmanaged', labels };
}

/** A no-op change of a document, before it is compared with what exists. */
function documentChange(doc: ConfigDocument, key: string, existing: LiveResource | undefined, owned: Ownership): PlannedChange {
  return {
    kind: doc.descriptor.kind,
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
    ownership: owned.ownership,
    labels: owned.labels,
  };
}

/** A create: every declared field is a change. */
function planCreate(change: PlannedChange, doc: ConfigDocument, body: Record<string, unknown>, ops: Operation[]): void {
  change.action = 'create';
  change.changes = leafChanges([], {}, displayBody(doc, body));
  if (!ops.includes('create')) change.unsupported = `the service has no create for ${doc.descriptor.kind}`;
}

/** An existing resource: the diff decides between no-op, update (the fields to PATCH) and replace. */
function planExisting(change: PlannedChange, doc: ConfigDocument, body: Record<string, unknown>, existing: LiveResource, ops: Operation[]) {
  const d = doc.descriptor;
  const { ownership, labels } = change;
  const diff = diffResource(d, body, existing.object, { clearUndeclared: ownership === 'owned' || ownership === 'adopted' });
  const changes = diff.changes.filter((c) => !c.field.startsWith(`${LABELS_FIELD}.${SECRETS_SHA_LABEL}`));
  const fields = new Set(diff.fields);
  if (hasLabels(d) && doc.secrets.length) {
    const liveSha = labelOf(existing, SECRETS_SHA_LABEL);
    if (liveSha !== labels![SECRETS_SHA_LABEL]) {
      for (const f of secretTopFields(d)) if (body[f] !== undefined) fields.add(f);
      for (const s of doc.secrets) changes.push({ field: s.field, before: SENSITIVE, after: SENSITIVE, sensitive: true });
      if (liveSha === undefined)
        addTo(change, 'notes', 'secret values cannot be read back and carry no fingerprint yet: they are set again');
      // A fingerprint that becomes keyed has its own note (fingerprintFor).
      else if (isKeyed(liveSha) === isKeyed(labels![SECRETS_SHA_LABEL]))
        addTo(
          change,
          'notes',
          doc.policy.secretsVersion === undefined
            ? 'a secret value changed (fingerprint differs)'
            : 'a secret value or dpctl.dev/secrets-version changed (fingerprint differs)',
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

/**
 * One document's part of a plan: its change, or the errors that keep it out (`owner`: the other
 * source that manages it, for an ownership conflict); undefined when it is not planned.
 */
export type DocumentPlan = { change: PlannedChange } | { errors: Problem[]; owner?: string } | undefined;

/** Plans one declared document against what exists under its key. */
export function planDocument(doc: ConfigDocument, ctx: PlanContext): DocumentPlan {
  // dpctl.dev/reconcile: disabled: never planned; still declared, so never pruned either.
  if (doc.policy.reconcile === 'disabled') return undefined;
  const missing = missingProjectError(doc, ctx);
  if (missing !== undefined) return { errors: [missing] };
  const existing = ctx.state.resources.get(docKey(doc));
  // The same key, as one string shared with the live state when the resource exists.
  const key = existing?.key ?? docKey(doc);
  const built = documentBody(doc, ctx);
  if ('errors' in built) return built;
  const { body } = built;
  const owned = ownershipOf(doc, existing, ctx.options);
  if ('conflict' in owned) return { errors: [owned.conflict], owner: ownerOf(existing) };
  let fingerprintNote: string | undefined;
  if (owned.labels) {
    if (doc.secrets.length) {
      const fingerprint = fingerprintFor(
        key,
        secretValues(doc, ctx.secrets),
        labelOf(existing, SECRETS_SHA_LABEL),
        ctx.options.fingerprintKey,
      );
      owned.labels[SECRETS_SHA_LABEL] = fingerprint.label;
      fingerprintNote = fingerprint.note;
    }
    body[LABELS_FIELD] = owned.labels;
  }
  const change = documentChange(doc, key, existing, owned);
  if (fingerprintNote) addTo(change, 'notes', fingerprintNote);
  if (!hasLabels(doc.descriptor) && doc.secrets.length) {
    addTo(
      change,
      'notes',
      `${doc.secrets.map((s) => s.field).join(', ')}: write-only and this kind has no labels to hold a fingerprint, so set on create only (never compared)`,
    );
  }
  if (owned.ownership === 'unmanaged')
    addTo(change, 'notes', 'exists and was not created by dpctl: updated in place, never pruned (--adopt to take ownership)');
  const ops = opsOf(doc.descriptor, ctx.options.specOperations);
  if (!existing) planCreate(change, doc, body, ops);
  else planExisting(change, doc, body, existing, ops);
  if (doc.policy.reconcile === 'observe' && change.action !== 'no-op') {
    change.observeOnly = true;
    addTo(change, 'notes', OBSERVE_NOTE);
  }
  return { change };
}

/** Every document's change, in document order, and the errors of those that cannot be planned. */
export function planDocuments(documents: ConfigDocument[], ctx: PlanContext): { changes: PlannedChange[]; errors: Problem[] } {
  return runSteps(planDocumentSteps(documents, ctx));
}

function* planDocumentSteps(documents: ConfigDocument[], ctx: PlanContext): Steps<{ changes: PlannedChange[]; errors: Problem[] }> {
  const changes: PlannedChange[] = [];
  const errors: Problem[] = [];
  const conflicts: OwnershipConflict[] = [];
  for (const [i, doc] of documents.entries()) {
    if (i % ITEMS_PER_STEP === 0) yield;
    const planned = planDocument(doc, ctx);
    if (planned === undefined) continue;
    if ('change' in planned) {
      changes.push(planned.change);
      continue;
    }
    errors.push(...planned.errors);
    if (planned.owner !== undefined) conflicts.push({ problem: planned.errors[0], doc, owner: planned.owner });
  }
  return { changes, errors: nestUnderProjectConflicts(errors, conflicts) };
}

/**
 * A replaced resource gets a new id: whatever references the old one is replaced too (delete
 * first, re-create after), and so on down the references. Changes `changes` in place (actions,
 * reasons, notes); returns the warnings about live resources outside the config that reference
 * a replaced one.
 */
export function propagateReplacements(changes: PlannedChange[], state: LiveState, specOperations: boolean): string[] {
  // Sets, not includes() on the lists: a resource referenced by 10,000 others gets 10,000 notes.
  const warnings = new Set<string>();
  const noted = new Map<PlannedChange, Set<string>>();
  const note = (target: PlannedChange, text: string) => {
    let seen = noted.get(target);
    if (!seen) noted.set(target, (seen = new Set(target.notes)));
    if (seen.has(text)) return;
    seen.add(text);
    addTo(target, 'notes', text);
  };
  let byKey: Map<string, PlannedChange> | undefined;
  let grew = true;
  while (grew) {
    grew = false;
    const replacedIds = new Map(changes.filter((c) => c.action === 'replace' && c.id).map((c) => [c.id!, c]));
    if (!replacedIds.size) break;
    byKey ??= new Map(changes.map((c) => [c.key, c]));
    for (const [k, r] of state.resources) {
      const refs = liveReferences(r).filter((id) => replacedIds.has(id));
      if (!refs.length) continue;
      const dependent = byKey.get(k);
      for (const id of refs) {
        const target = replacedIds.get(id)!;
        note(target, `referenced by ${kindAndName(r)}`);
      }
      if (!dependent) {
        for (const id of refs) {
          const target = replacedIds.get(id)!;
          warnings.add(
            `${subjectOfChange(target)}: ${r.descriptor.yamlKind} ${r.object[r.descriptor.identity]} references it and is not in the config, so deleting it will fail (409)`,
          );
        }
        continue;
      }
      if (dependent.action === 'replace') continue;
      dependent.action = 'replace';
      addTo(dependent, 'reasons', `depends on ${refs.map((id) => subjectOfChange(replacedIds.get(id)!)).join(', ')}, which is replaced`);
      const ops = opsOf(dependent.doc!.descriptor, specOperations);
      if (!ops.includes('delete') || !ops.includes('create'))
        dependent.unsupported = `the service cannot delete and re-create ${dependent.kind}`;
      grew = true;
    }
  }
  return [...warnings];
}

/** The deletion of a managed resource that left the config (`inside`: the live resources in a project). */
function pruneChange(
  r: LiveResource,
  inside: (project: string) => readonly LiveResource[],
  options: Pick<PlanOptions, 'specOperations'>,
): PlannedChange {
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
  if (d.scopeContainer) {
    const count = inside(name).length;
    addTo(change, 'notes', `deleting a project deletes everything in it (${count} resource${count === 1 ? '' : 's'})`);
  }
  if (!opsOf(d, options.specOperations).includes('delete')) change.unsupported = `the service has no delete for ${d.kind}`;
  return change;
}

/**
 * Why a managed project left out of the config is kept: deleting a project deletes everything in
 * it, and prune deletes only what this source manages (as a storage bucket with objects in it is
 * not destroyed without force). Undefined when everything in it is this source's.
 */
function projectKeptWarning(project: LiveResource, inside: (project: string) => readonly LiveResource[], sourceId: string) {
  const name = String(project.object[project.descriptor.identity]);
  const foreign = inside(name).filter((x) => !hasLabels(x.descriptor) || ownerOf(x) !== sourceId);
  if (!foreign.length) return undefined;
  const shown = foreign.slice(0, 5).map(kindAndName);
  const more = foreign.length > shown.length ? `, and ${foreign.length - shown.length} more` : '';
  const one = foreign.length === 1;
  return (
    `Project ${name} is not pruned: it holds ${foreign.length} resource${one ? '' : 's'} this source does not manage ` +
    `(${shown.join(', ')}${more}), which deleting the project would delete too. The managed resources in it are pruned; ` +
    `once the others are deleted by hand (or moved), the next prune deletes the project. To keep the project, declare it again`
  );
}

export interface PruneResult {
  /** Deletes, one per managed resource left out of the config (none for those inside a pruned project). */
  changes: PlannedChange[];
  warnings: string[];
  /** The mass-delete guard. */
  errors: Problem[];
}

/**
 * Prune: the deletion of every live resource labelled as managed by this source whose key no
 * document declares (what is inside a pruned project goes with it; a project holding resources
 * this source does not manage is kept, and its managed contents pruned one by one), guarded
 * against deleting more than the larger of 5 and 20% of the managed resources.
 */
export function planPrune(state: LiveState, declared: Set<string>, managedCount: number, options: PlanOptions): PruneResult {
  const out: PruneResult = { changes: [], warnings: [], errors: [] };
  const inside = projectContents(state);
  const prunable: LiveResource[] = [];
  for (const r of undeclaredManaged(state, declared, options.sourceId)) {
    const kept = r.descriptor.scopeContainer ? projectKeptWarning(r, inside, options.sourceId) : undefined;
    if (kept === undefined) prunable.push(r);
    else out.warnings.push(kept);
  }
  const deletedProjects = new Set(prunable.filter((r) => r.descriptor.scopeContainer).map((r) => String(r.object.name)));
  for (const r of prunable) {
    if (r.project !== undefined && deletedProjects.has(r.project)) continue; // goes with its project
    out.changes.push(pruneChange(r, inside, options));
  }
  if (deletedProjects.size && options.sourceIdDefaulted) {
    const names = [...deletedProjects].map((n) => JSON.stringify(n)).join(', ');
    out.errors.push({
      code: 'project_prune_default_source',
      message: `refusing to prune project ${names} with the source id "${options.sourceId}" taken from the config directory's name: another repository with a directory of that name has the same one, and its projects look like this one's. If the project is this repository's, pass --source-id ${options.sourceId}`,
    });
  }
  const limit = Math.max(5, Math.floor(managedCount * 0.2));
  if (prunable.length > limit && !options.allowMassDelete) {
    out.errors.push({
      code: 'mass_delete',
      message: `refusing to delete ${prunable.length} of ${managedCount} managed resources (more than ${limit}, the larger of 5 and 20%): check the path and --source-id, or pass --allow-mass-delete`,
    });
  }
  return out;
}

/**
 * The prunes the service will refuse (409): a live resource the plan leaves alone (not declared,
 * not deleted, not in a deleted project) references the pruned one. One warning per prune, naming
 * the first such referrer and counting the others. One pass over the live resources.
 */
function blockedPruneWarnings(prunes: PlannedChange[], changes: PlannedChange[], state: LiveState): string[] {
  const byId = new Map(prunes.filter((c) => c.id).map((c) => [c.id!, c]));
  if (!byId.size) return [];
  const planned = new Set(changes.map((c) => c.key));
  const deletedProjects = new Set(prunes.filter((c) => c.live?.descriptor.scopeContainer).map((c) => c.name));
  const referrers = new Map<PlannedChange, string[]>();
  for (const [k, r] of state.resources) {
    if (planned.has(k) || (r.project !== undefined && deletedProjects.has(r.project))) continue;
    for (const id of liveReferences(r)) {
      const target = byId.get(id);
      if (target) appendTo(referrers, target, kindAndName(r));
    }
  }
  return [...referrers].map(([target, names]) => {
    const more = names.length > 1 ? ` (and ${names.length - 1} more)` : '';
    return `${subjectOfChange(target)}: ${names[0]}${more} references it and is not in the config, so pruning it will fail (409): change or delete that first`;
  });
}

/** Live resources labelled as managed by this source that no document declares: what prune deletes. */
function undeclaredManaged(state: LiveState, declared: Set<string>, sourceId: string): LiveResource[] {
  const out: LiveResource[] = [];
  for (const [k, r] of state.resources) if (!declared.has(k) && hasLabels(r.descriptor) && ownerOf(r) === sourceId) out.push(r);
  return out;
}

/**
 * Without --prune, resources removed from the config stay, and the plan said "No changes":
 * users of Terraform expect a removal to show. One line says how many stay, and how to see or delete them.
 */
function keptUndeclaredWarning(state: LiveState, declared: Set<string>, sourceId: string): string | undefined {
  const kept = undeclaredManaged(state, declared, sourceId);
  if (!kept.length) return undefined;
  const shown = kept.slice(0, 3).map((r) =>
    subjectOfChange({
      yamlKind: r.descriptor.yamlKind ?? r.descriptor.kind,
      project: r.project,
      name: String(r.object[r.descriptor.identity]),
    }),
  );
  const more = kept.length > shown.length ? `, and ${kept.length - shown.length} more` : '';
  const one = kept.length === 1;
  // Another repository with the same source id (every `platform/` directory defaults to "platform") looks the same.
  return `${kept.length} managed resource${one ? ' is' : 's are'} no longer in the config and kept (${shown.join(', ')}${more}): --prune deletes ${one ? 'it' : 'them'}, dpctl drift lists ${one ? 'it' : 'them'}; if ${one ? 'it belongs' : 'they belong'} to another repository, give each repository its own --source-id (this one is "${sourceId}")`;
}

/** The live resources of a project, grouped on first use (only a pruned project asks). */
const projectContents = (state: LiveState) =>
  groupsOnFirstUse<string, LiveResource>((add) => {
    for (const r of state.resources.values()) if (r.project !== undefined) add(r.project, r);
  });

/** How many changes of each action, and how many the service cannot apply. */
export function tally(changes: PlannedChange[]): Plan['summary'] {
  const summary: Plan['summary'] = { create: 0, update: 0, replace: 0, delete: 0, 'no-op': 0, unsupported: 0 };
  for (const c of changes) {
    summary[c.action]++;
    if (c.unsupported) summary.unsupported++;
  }
  return summary;
}

/**
 * Plans the whole graph: every declared document against what was observed, by the
 * descriptors' rules, and (with prune) the deletion of managed resources that left the config.
 * Phases: per-document plan, replacement propagation, prune, tally, prevent-destroy check.
 */
export function makePlan(documents: ConfigDocument[], state: LiveState, secrets: ResolvedSecrets, options: PlanOptions): Plan {
  return runSteps(planSteps(documents, state, secrets, options));
}

/**
 * makePlan with a turn of the event loop every ITEMS_PER_STEP documents once TURN_MS have passed
 * (steps.ts), for the controller: in one go, a plan of 101,000 documents held its event loop for 3 s.
 */
export function makePlanInTurns(
  documents: ConfigDocument[],
  state: LiveState,
  secrets: ResolvedSecrets,
  options: PlanOptions,
): Promise<Plan> {
  return runStepsInTurns(planSteps(documents, state, secrets, options));
}

function* planSteps(documents: ConfigDocument[], state: LiveState, secrets: ResolvedSecrets, options: PlanOptions): Steps<Plan> {
  const ctx = planContext(documents, state, secrets, options);
  const managedCount = countManaged(state, options.sourceId);
  yield;
  const { changes, errors } = yield* planDocumentSteps(documents, ctx);
  const warnings = [...new Set([...state.warnings, ...propagateReplacements(changes, state, options.specOperations)])];
  const declared = new Set(documents.map(docKey));
  if (options.prune) {
    const pruned = planPrune(state, declared, managedCount, options);
    for (const c of pruned.changes) changes.push(c);
    pushAll(warnings, pruned.warnings);
    pushAll(warnings, blockedPruneWarnings(pruned.changes, changes, state));
    pushAll(errors, pruned.errors);
  } else {
    const kept = keptUndeclaredWarning(state, declared, options.sourceId);
    if (kept) warnings.push(kept);
  }
  const unkeyed = unkeyedFingerprintWarning(changes, options.fingerprintKey);
  if (unkeyed) warnings.push(unkeyed);
  const plan: Plan = { sourceId: options.sourceId, changes, errors, warnings, managedCount, summary: tally(changes) };
  pushAll(plan.errors, preventDestroyErrors(plan));
  return plan;
}

/** True when the plan changes something (unsupported changes count: the platform differs from the config; observe-only ones do not: nothing will change them). */
export const hasChanges = (plan: Plan) => plan.changes.some((c) => c.action !== 'no-op' && !c.observeOnly);
