import { AmbiguousCreateError, ApiError, type DataPlatformClient, type DynamicResourceClient } from '../client/index.js';
import { declaredLookup, firstOf, toApiBody, type ConfigDocument, type ResolvedSecrets } from '../config/index.js';
import { kind as kindNamed, type KindDescriptor } from '../kinds/index.js';
import { LABELS_FIELD } from './diff.js';
import { keepIgnoredLive } from './policy.js';
import { resourceKey, type LiveObject, type LiveState } from './observe.js';
import { docKey, liveLookup, liveReferences, subjectOfChange, type Plan, type PlannedChange } from './plan.js';

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

const projectKey = (name: string) => resourceKey(kindNamed('project'), undefined, name);

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
      for (const [k, r] of state.resources) {
        if (!c.id || !liveReferences(r).includes(c.id)) continue;
        dep(node.id, `delete:${k}`);
        if (nodes.get(`write:${k}`)?.change.action === 'update') dep(node.id, `write:${k}`);
      }
      // A project goes after the deletes inside it.
      if (c.kind === 'project')
        for (const other of nodes.values()) if (other.step === 'delete' && other.change.project === c.name) dep(node.id, other.id);
    }
  }
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

export interface ScheduleOptions {
  concurrency: number;
  signal?: AbortSignal;
  progress: Progress;
}

/**
 * Runs every node whose dependencies are done, at most `concurrency` at a time, as workers free
 * up. A node not done (failed, skipped, unsupported) skips what depends on it; an abort skips
 * what has not started; what still waits when nothing runs waits on a cycle and fails.
 */
export function schedule(nodes: Map<string, ApplyNode>, run: (node: ApplyNode) => Promise<void>, options: ScheduleOptions): Promise<void> {
  const { progress } = options;
  const pending = new Set(nodes.keys());
  let running = 0;
  return new Promise<void>((resolveAll) => {
    const skipDependents = (node: ApplyNode) => {
      const stack = [...node.dependents];
      while (stack.length) {
        const dn = nodes.get(stack.pop()!)!;
        if (dn.state !== 'pending') continue;
        dn.state = 'skipped';
        dn.message = `skipped: ${subjectOfChange(node.change)} was not ${node.step === 'delete' ? 'deleted' : 'applied'}`;
        progress(`  ${subjectOfChange(dn.change)}: ${dn.message}`);
        pending.delete(dn.id);
        stack.push(...dn.dependents);
      }
    };
    const finish = (node: ApplyNode) => {
      running--;
      if (node.state === 'failed' || node.state === 'skipped' || node.state === 'unsupported') skipDependents(node);
      pump();
    };
    const start = (node: ApplyNode) => {
      pending.delete(node.id);
      node.state = 'running';
      running++;
      run(node).then(
        () => {
          if (node.state === 'running') node.state = 'done';
          if (node.state === 'unsupported') progress(`! ${subjectOfChange(node.change)}: ${node.message}`);
          finish(node);
        },
        (err: Error) => {
          node.state = 'failed';
          node.message = err.message;
          progress(`x ${subjectOfChange(node.change)}: failed: ${err.message}`);
          finish(node);
        },
      );
    };
    const settleAll = (state: 'skipped' | 'failed', message: string) => {
      for (const id of pending) {
        const node = nodes.get(id)!;
        node.state = state;
        node.message = message;
      }
      pending.clear();
    };
    const pump = () => {
      if (options.signal?.aborted) settleAll('skipped', 'not started: the apply was stopped');
      for (const id of [...pending]) {
        if (running >= options.concurrency) break;
        const node = nodes.get(id)!;
        if ([...node.deps].some((d) => nodes.get(d)!.state !== 'done')) continue;
        start(node);
      }
      if (running === 0) {
        // Anything still pending waits on a cycle: report it instead of hanging.
        settleAll('failed', 'dependency cycle');
        resolveAll();
      }
    };
    pump();
  });
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
