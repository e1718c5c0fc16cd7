import { AmbiguousCreateError, ApiError, type DataPlatformClient } from '../client/index.js';
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
interface Node {
  id: string;
  change: PlannedChange;
  step: Step;
  deps: Set<string>;
  dependents: Set<string>;
  state: 'pending' | 'running' | 'done' | 'failed' | 'skipped' | 'unsupported';
  message?: string;
}

/**
 * Applies a plan: writes (create, update, the create half of a replace) in reference order,
 * deletes (prune, the delete half of a replace) in reverse order, at most `concurrency` at a
 * time. A failed change is reported and what depends on it is skipped; the rest goes on.
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
  const nodes = new Map<string, Node>();
  const add = (change: PlannedChange, step: Step) => {
    const id = `${step}:${change.key}`;
    nodes.set(id, { id, change, step, deps: new Set(), dependents: new Set(), state: 'pending' });
    return id;
  };
  const outcomes = new Map<PlannedChange, Outcome>();
  for (const c of plan.changes) {
    // Observe-only (dpctl.dev/reconcile: observe): reported by the plan and drift, never written.
    if (c.action === 'no-op' || c.observeOnly) continue;
    if (c.unsupported) {
      outcomes.set(c, { change: c, status: 'unsupported', message: c.unsupported });
      progress(`! ${subjectOfChange(c)}: not applied: ${c.unsupported}`);
      continue;
    }
    if (c.action === 'delete' || c.action === 'replace') add(c, 'delete');
    if (c.action !== 'delete') add(c, 'write');
  }
  const descriptors = new Map<string, KindDescriptor>(documents.map((d) => [d.descriptor.kind, d.descriptor]));
  const dep = (from: string, to: string) => {
    const a = nodes.get(from);
    const b = nodes.get(to);
    if (!a || !b || from === to) return;
    a.deps.add(to);
    b.dependents.add(from);
  };
  const projectKey = (name: string) => resourceKey(kindNamed('project'), undefined, name);
  const keyByLiveId = new Map<string, string>();
  for (const [k, r] of state.resources) keyByLiveId.set(r.object.id, k);
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
  const ids = new Map<string, string>();
  for (const [k, r] of state.resources) ids.set(k, r.object.id);
  const lookup = firstOf(
    declaredLookup(documents, (doc) => ids.get(docKey(doc))),
    liveLookup(state, descriptors),
  );

  const run = async (node: Node): Promise<void> => {
    const c = node.change;
    const d = c.doc?.descriptor ?? c.live!.descriptor;
    const projectId = c.project !== undefined ? ids.get(projectKey(c.project)) : undefined;
    const api = client.resourcesOf(d.kind, { projectId });
    if (node.step === 'delete') {
      try {
        await api.delete(c.id!);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) {
          const still = await api.findByName(c.name).catch(() => undefined);
          if (still) {
            node.state = 'unsupported';
            node.message = `the service answered 404 to DELETE ${err.route}: it does not serve that operation`;
            return;
          }
        } else throw err;
      }
      ids.delete(c.key);
      progress(`- ${subjectOfChange(c)}: deleted${c.action === 'replace' ? ' (to re-create)' : ''}`);
      return;
    }
    const body = toApiBody(c.doc!, lookup, secrets);
    if (c.labels) body[LABELS_FIELD] = { ...c.labels };
    if (c.action === 'update') {
      const patch: Record<string, unknown> = {};
      // Ignored paths under a patched field keep their live value (dpctl.dev/ignore-fields).
      for (const f of c.patchFields) patch[f] = body[f] === undefined ? null : keepIgnoredLive(c.doc!.policy, f, body[f], c.live!.object);
      try {
        await api.update(c.id!, patch);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) {
          const still = await api.findByName(c.name).catch(() => undefined);
          if (still) {
            node.state = 'unsupported';
            node.message = `the service answered 404 to PATCH ${err.route}: it does not serve that operation`;
            return;
          }
        }
        throw err;
      }
      progress(`~ ${subjectOfChange(c)}: updated (${c.patchFields.join(', ')})`);
      return;
    }
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
  };

  // Scheduler: ready nodes run as workers free up.
  const pending = new Set(nodes.keys());
  await new Promise<void>((resolveAll) => {
    let running = 0;
    const finish = (node: Node) => {
      running--;
      if (node.state === 'failed' || node.state === 'skipped' || node.state === 'unsupported') {
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
      }
      pump();
    };
    const pump = () => {
      if (options.signal?.aborted) {
        for (const id of pending) {
          const node = nodes.get(id)!;
          node.state = 'skipped';
          node.message = 'not started: the apply was stopped';
        }
        pending.clear();
      }
      for (const id of [...pending]) {
        if (running >= options.concurrency) break;
        const node = nodes.get(id)!;
        if ([...node.deps].some((d) => nodes.get(d)!.state !== 'done')) continue;
        pending.delete(id);
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
      }
      if (running === 0) {
        // Anything still pending waits on a cycle: report it instead of hanging.
        for (const id of pending) {
          const node = nodes.get(id)!;
          node.state = 'failed';
          node.message = 'dependency cycle';
        }
        pending.clear();
        resolveAll();
      }
    };
    pump();
  });

  for (const node of nodes.values()) {
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
