import { AmbiguousCreateError, ApiError, type DataPlatformClient, type DynamicResourceClient } from '../client/index.js';
import { declaredLookup, firstOf, toApiBody, type ConfigDocument, type ResolvedSecrets } from '../config/index.js';
import { type KindDescriptor } from '../kinds/index.js';
import { LABELS_FIELD } from './diff.js';
import { keepIgnoredLive } from './policy.js';
import { projectKey, resourceKey, type LiveObject, type LiveState } from './observe.js';
import { docKey, liveLookup, liveReferences, subjectOfChange, type Plan, type PlannedChange } from './plan.js';
import { schedule } from './schedule.js';
import { groupsOnFirstUse } from '../collections.js';

export type OutcomeStatus = 'done' | 'failed' | 'skipped' | 'unsupported';

export interface Outcome {
  change: PlannedChange;
  status: OutcomeStatus;
  message?: string;
  /** Id after the apply (created or replaced resources). */
  id?: string;
}

export interface ApplyResult {
  outcomes: Outcome[];
  /** Every change done: the platform matches the config. */
  converged: boolean;
}

export interface ApplyOptions {
  concurrency: number;
  onProgress?: (line: string) => void;
  /**
   * Stops starting changes once aborted (a controller shutting down): changes in flight
   * finish, the rest are reported skipped and are planned again by the next run.
   */
  signal?: AbortSignal;
}

type Step = 'delete' | 'write';

/** One half of a change in an apply: its delete (prune, the first half of a replace) or its write. */
export interface ApplyNode {
  id: string;
  change: PlannedChange;
  step: Step;
  /** Ids of the nodes that must be done first. */
  deps: Set<string>;
  dependents: Set<string>;
  state: 'pending' | 'running' | 'done' | 'failed' | 'skipped' | 'unsupported';
  /** Why it failed or was skipped; a write's new id once done. */
  message?: string;
}

/** What an apply runs: a node per delete and write, linked by what each waits for. */
export interface ApplyGraph {
  nodes: Map<string, ApplyNode>;
  /** Changes the service cannot apply: reported as they are, never started. */
  unsupported: Outcome[];
}

/**
 * The graph of a plan: writes (create, update, the create half of a replace) after what they
 * reference, deletes (prune, the delete half of a replace) after whatever references them.
 */
export function applyGraph(plan: Plan, descriptors: Map<string, KindDescriptor>, state: LiveState): ApplyGraph {
  const nodes = new Map<string, ApplyNode>();
  const unsupported: Outcome[] = [];
  const add = (change: PlannedChange, step: Step) => {
    const id = `${step}:${change.key}`;
    nodes.set(id, { id, change, step, deps: new Set(), dependents: new Set(), state: 'pending' });
  };
  for (const c of plan.changes) {
    // Observe-only (dpctl.dev/reconcile: observe): reported by the plan and drift, never written.
    if (c.action === 'no-op' || c.observeOnly) continue;
    if (c.unsupported) {
      unsupported.push({ change: c, status: 'unsupported', message: c.unsupported });
      continue;
    }
    if (c.action === 'delete' || c.action === 'replace') add(c, 'delete');
    if (c.action !== 'delete') add(c, 'write');
  }
  linkDependencies(nodes, descriptors, state);
  return { nodes, unsupported };
}

function linkDependencies(nodes: Map<string, ApplyNode>, descriptors: Map<string, KindDescriptor>, state: LiveState): void {
  const dep = (from: string, to: string) => {
    const a = nodes.get(from);
    const b = nodes.get(to);
    if (!a || !b || from === to) return;
    a.deps.add(to);
    b.dependents.add(from);
  };
  const index = deleteIndex(nodes, state);
  for (const node of nodes.values()) {
    const c = node.change;
    if (node.step === 'write') {
      const doc = c.doc!;
      if (doc.project !== undefined) dep(node.id, `write:${projectKey(doc.project)}`);
      for (const ref of doc.references) {
        const d = descriptors.get(ref.kind);
        if (d) dep(node.id, `write:${resourceKey(d, doc.project, ref.name)}`);
      }
      dep(node.id, `delete:${c.key}`);
    } else {
      // Delete after whatever references it is deleted or updated away from it.
      for (const k of c.id ? index.referrersOf(c.id) : []) {
        dep(node.id, `delete:${k}`);
        if (nodes.get(`write:${k}`)?.change.action === 'update') dep(node.id, `write:${k}`);
      }
      // A project goes after the deletes inside it.
      if (c.live?.descriptor.scopeContainer) for (const other of index.deletesIn(c.name)) dep(node.id, other.id);
    }
  }
  makeRoomInFullScopes(nodes, state, dep);
}

/**
 * In a scope with a cap (`x-max-per-scope`: a tenant's SSO providers, a project's alert rules)
 * that the creates would take past it, the creates beyond the free places wait for the prunes of
 * that kind there, one each: renaming a resource of a full project frees its place before taking
 * it, in one run. Everywhere else no create waits for a delete, so a create that fails leaves
 * the resource it was to succeed in place. Only prunes that wait for nothing are paired: one
 * that waits for a referrer to move away could wait, through it, for the very create (a masking
 * policy moved from a classification renamed in a full project), and the pair would never start.
 */
function makeRoomInFullScopes(nodes: Map<string, ApplyNode>, state: LiveState, dep: (from: string, to: string) => void): void {
  const scopes = new Map<string, { cap: number; creates: ApplyNode[]; prunes: ApplyNode[] }>();
  for (const node of nodes.values()) {
    const c = node.change;
    const cap = (c.doc?.descriptor ?? c.live?.descriptor)?.maxPerScope;
    const creates = node.step === 'write' && c.action === 'create';
    if (cap === undefined || !(creates || (node.step === 'delete' && c.action === 'delete'))) continue;
    const key = scopeOf(c.kind, c.project);
    let scope = scopes.get(key);
    if (!scope) scopes.set(key, (scope = { cap, creates: [], prunes: [] }));
    if (creates) scope.creates.push(node);
    else if (!node.deps.size) scope.prunes.push(node);
  }
  const both = [...scopes].filter(([, s]) => s.creates.length && s.prunes.length);
  if (!both.length) return;
  const live = new Map<string, number>();
  for (const r of state.resources.values()) {
    if (r.descriptor.maxPerScope === undefined) continue;
    const key = scopeOf(r.descriptor.kind, r.project);
    live.set(key, (live.get(key) ?? 0) + 1);
  }
  for (const [key, { cap, creates, prunes }] of both) {
    const free = Math.max(0, cap - (live.get(key) ?? 0));
    for (let i = free; i < creates.length && i - free < prunes.length; i++) dep(creates[i].id, prunes[i - free].id);
  }
}

const scopeOf = (kind: string, project: string | undefined) => `${kind}\0${project ?? ''}`;

/**
 * What the deletes of a graph wait for, indexed once on first use: the live resources that
 * reference an id, and the deletes inside a project. Looking through every live resource for
 * each delete grew with deletes x resources (a prune of 1,000 among 100,000: 10^8 steps).
 */
function deleteIndex(nodes: Map<string, ApplyNode>, state: LiveState) {
  return {
    /** Keys of the live resources that reference the id. */
    referrersOf: groupsOnFirstUse<string, string>((add) => {
      for (const [k, r] of state.resources) for (const target of new Set(liveReferences(r))) add(target, k);
    }),
    /** The delete nodes inside a project. */
    deletesIn: groupsOnFirstUse<string | undefined, ApplyNode>((add) => {
      for (const other of nodes.values()) if (other.step === 'delete') add(other.change.project, other);
    }),
  };
}

type Progress = (line: string) => void;

/** After a 404 to a write: when the resource is still there, the service does not serve that operation. */
async function notServed(api: DynamicResourceClient, node: ApplyNode, request: string): Promise<boolean> {
  const still = await api.findByName(node.change.name).catch(() => undefined);
  if (!still) return false;
  node.state = 'unsupported';
  node.message = `the service answered 404 to ${request}: it does not serve that operation`;
  return true;
}

async function runDelete(api: DynamicResourceClient, node: ApplyNode, ids: Map<string, string>, progress: Progress): Promise<void> {
  const c = node.change;
  try {
    await api.delete(c.id!);
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 404)) throw err;
    // Otherwise it is gone already.
    if (await notServed(api, node, `DELETE ${err.route}`)) return;
  }
  ids.delete(c.key);
  progress(`- ${subjectOfChange(c)}: deleted${c.action === 'replace' ? ' (to re-create)' : ''}`);
}

async function runUpdate(api: DynamicResourceClient, node: ApplyNode, body: Record<string, unknown>, progress: Progress): Promise<void> {
  const c = node.change;
  const patch: Record<string, unknown> = {};
  // Ignored paths under a patched field keep their live value (dpctl.dev/ignore-fields).
  for (const f of c.patchFields) patch[f] = body[f] === undefined ? null : keepIgnoredLive(c.doc!.policy, f, body[f], c.live!.object);
  try {
    await api.update(c.id!, patch);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404 && (await notServed(api, node, `PATCH ${err.route}`))) return;
    throw err;
  }
  progress(`~ ${subjectOfChange(c)}: updated (${c.patchFields.join(', ')})`);
}

async function runCreate(
  api: DynamicResourceClient,
  node: ApplyNode,
  body: Record<string, unknown>,
  ids: Map<string, string>,
  progress: Progress,
): Promise<void> {
  const c = node.change;
  let created: LiveObject | undefined;
  try {
    created = (await api.create(body)) as LiveObject;
  } catch (err) {
    if (!(err instanceof AmbiguousCreateError)) throw err;
    // Never re-send a create blindly: it may have been applied.
    const found = (await api.findByName(c.name)) as LiveObject | undefined;
    if (found) {
      created = found;
      progress(`  ${subjectOfChange(c)}: the create failed ambiguously; found it by name, so it was applied`);
    } else {
      progress(`  ${subjectOfChange(c)}: the create failed ambiguously and it does not exist; creating it again`);
      created = (await api.create(body)) as LiveObject;
    }
  }
  ids.set(c.key, created.id);
  node.message = created.id;
  progress(`+ ${subjectOfChange(c)}: ${c.action === 'replace' ? 're-created' : 'created'} (${created.id})`);
}

/**
 * Runs one node against the service. Ids of what exists are kept up to date as deletes and
 * creates go, so that a write's references resolve to what its dependencies created.
 */
function executor(
  client: DataPlatformClient,
  documents: ConfigDocument[],
  descriptors: Map<string, KindDescriptor>,
  state: LiveState,
  secrets: ResolvedSecrets,
  progress: Progress,
): (node: ApplyNode) => Promise<void> {
  const ids = new Map<string, string>();
  for (const [k, r] of state.resources) ids.set(k, r.object.id);
  const lookup = firstOf(
    declaredLookup(documents, (doc) => ids.get(docKey(doc))),
    liveLookup(state, descriptors),
  );
  return async (node) => {
    const c = node.change;
    const d = c.doc?.descriptor ?? c.live!.descriptor;
    const projectId = c.project !== undefined ? ids.get(projectKey(c.project)) : undefined;
    const api = client.resourcesOf(d.kind, { projectId });
    if (node.step === 'delete') return runDelete(api, node, ids, progress);
    const body = toApiBody(c.doc!, lookup, secrets);
    if (c.labels) body[LABELS_FIELD] = { ...c.labels };
    if (c.action === 'update') return runUpdate(api, node, body, progress);
    return runCreate(api, node, body, ids, progress);
  };
}

/** One outcome per change: unsupported ones first, then by node (a replace is done only when both halves are). */
export function outcomesOf(graph: ApplyGraph): ApplyResult {
  const outcomes = new Map<PlannedChange, Outcome>(graph.unsupported.map((o) => [o.change, o]));
  for (const node of graph.nodes.values()) {
    const prior = outcomes.get(node.change);
    const status: OutcomeStatus =
      node.state === 'done' ? 'done' : node.state === 'unsupported' ? 'unsupported' : node.state === 'skipped' ? 'skipped' : 'failed';
    // A replace is done only when both halves are.
    if (prior && prior.status !== 'done' && status === 'done') continue;
    outcomes.set(node.change, {
      change: node.change,
      status,
      message: node.state === 'done' ? undefined : node.message,
      id: node.step === 'write' && node.state === 'done' ? node.message : prior?.id,
    });
  }
  const list = [...outcomes.values()];
  return { outcomes: list, converged: list.every((o) => o.status === 'done') };
}

/**
 * Applies a plan: writes (create, update, the create half of a replace) in reference order,
 * deletes (prune, the delete half of a replace) in reverse order, at most `concurrency` at a
 * time. A failed change is reported and what depends on it is skipped; the rest goes on.
 * Phases: graph, schedule (each node run by the executor), outcomes.
 */
export async function applyPlan(
  client: DataPlatformClient,
  plan: Plan,
  documents: ConfigDocument[],
  state: LiveState,
  secrets: ResolvedSecrets,
  options: ApplyOptions,
): Promise<ApplyResult> {
  const progress = options.onProgress ?? (() => {});
  const descriptors = new Map<string, KindDescriptor>(documents.map((d) => [d.descriptor.kind, d.descriptor]));
  const graph = applyGraph(plan, descriptors, state);
  for (const o of graph.unsupported) progress(`! ${subjectOfChange(o.change)}: not applied: ${o.message}`);
  const run = executor(client, documents, descriptors, state, secrets, progress);
  await schedule(graph.nodes, run, { concurrency: options.concurrency, signal: options.signal, progress });
  return outcomesOf(graph);
}
