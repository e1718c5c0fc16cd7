import { ownerOf } from './diff.js';
import type { DataPlatformClient } from '../client/index.js';
import { ApiError } from '../client/index.js';
import { declarableKinds, type ConfigDocument } from '../config/index.js';
import { shareStrings } from '../config/share-strings.js';
import { SCOPE_CONTAINER, type KindDescriptor } from '../kinds/index.js';

export type LiveObject = Record<string, unknown> & { id: string };

/** A live resource with where it was found. */
export interface LiveResource {
  descriptor: KindDescriptor;
  /** Project name, for project-scoped kinds. */
  project?: string;
  projectId?: string;
  object: LiveObject;
  /** Its key in LiveState.resources, when observed (the plan's change shares the string). */
  key?: string;
}

/** Everything observed, by list calls only (100 per page). */
export interface LiveState {
  /** Live projects by name. */
  projects: Map<string, LiveObject>;
  /** Resources by key (see resourceKey), projects and users included. */
  resources: Map<string, LiveResource>;
  /** Resources by id. */
  byId: Map<string, LiveResource>;
  /** Which (kind, project) collections were listed: `kind\0project`. */
  listed: Set<string>;
  warnings: string[];
}

/** Identity values compare as the API does (lowercased when the kind normalises its identity). */
export function identityKey(d: KindDescriptor, value: string): string {
  return lowercaseIdentity(d) ? value.trim().toLowerCase() : value;
}

const lowercased = new WeakMap<KindDescriptor, boolean>();
function lowercaseIdentity(d: KindDescriptor): boolean {
  let lower = lowercased.get(d);
  if (lower === undefined) {
    lower = d.normalizers.some((n) => n.path.length === 1 && n.path[0] === d.identity && n.rule === 'lowercase');
    lowercased.set(d, lower);
  }
  return lower;
}

export function resourceKey(d: KindDescriptor, project: string | undefined, identity: string): string {
  // join makes one flat string; a template literal makes a tree of concatenations that a key held
  // per resource (the live state's, the plan's) keeps: ~50 bytes more each.
  return [d.kind, d.scope === 'project' ? (project ?? '') : '', identityKey(d, identity)].join('\u0000');
}

/** The key of a project (the scope container) in the live state and the plan. */
export const projectKey = (name: string): string => resourceKey(SCOPE_CONTAINER, undefined, name);

export const collectionKey = (kind: string, project: string | undefined) => `${kind}\u0000${project ?? ''}`;

/** Runs `fn` over `items` with at most `limit` at a time. */
export async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  });
  await Promise.all(workers);
  return out;
}

export interface ObserveOptions {
  /** Every declarable kind in every named project (for prune and drift), not only the kinds the config uses. */
  allKinds: boolean;
  concurrency: number;
  /** With allKinds: also list inside projects labelled as managed by this source (a pruned project takes its contents with it). */
  sourceId?: string;
  /** Every live project, when the caller started listing them earlier (dpctl does, before it parses the config); else listed here. */
  projects?: Promise<Record<string, unknown>[]>;
}

/**
 * Lists all projects, then, for each project the config names that exists, every kind the
 * config uses (or every declarable kind); tenant-level kinds once. Never one GET per resource.
 */
export async function observe(client: DataPlatformClient, documents: ConfigDocument[], options: ObserveOptions): Promise<LiveState> {
  const state: LiveState = { projects: new Map(), resources: new Map(), byId: new Map(), listed: new Set(), warnings: [] };
  // Equal strings of the listed objects become one (see shareStrings).
  const strings = new Map<string, string>();
  const add = (descriptor: KindDescriptor, project: string | undefined, projectId: string | undefined, object: LiveObject) => {
    shareStrings(object, strings);
    const identity = String(object[descriptor.identity] ?? object.id);
    const key = resourceKey(descriptor, project, identity);
    const r: LiveResource = { descriptor, project, projectId, object, key };
    state.resources.set(key, r);
    state.byId.set(object.id, r);
  };
  for (const p of await (options.projects ?? client.resourcesOf(SCOPE_CONTAINER.kind).listAll())) {
    const obj = p as LiveObject;
    state.projects.set(String(obj.name), obj);
    add(SCOPE_CONTAINER, undefined, undefined, obj);
  }
  state.listed.add(collectionKey(SCOPE_CONTAINER.kind, undefined));

  const kinds = options.allKinds ? declarableKinds() : [...new Map(documents.map((d) => [d.descriptor.kind, d.descriptor])).values()];
  const projectNames = new Set<string>();
  for (const doc of documents) {
    if (doc.project !== undefined) projectNames.add(doc.project);
    else if (doc.descriptor.scopeContainer) projectNames.add(doc.name);
  }
  if (options.allKinds && options.sourceId !== undefined) {
    for (const [name, p] of state.projects) if (ownerOf({ object: p }) === options.sourceId) projectNames.add(name);
  }
  const jobs: { descriptor: KindDescriptor; project?: string; projectId?: string }[] = [];
  for (const d of kinds) {
    if (d.scopeContainer || !d.operations.includes('list')) continue;
    if (d.scope === 'tenant') jobs.push({ descriptor: d });
    else
      for (const name of [...projectNames].sort()) {
        const live = state.projects.get(name);
        if (live) jobs.push({ descriptor: d, project: name, projectId: live.id });
      }
  }
  await mapLimit(jobs, options.concurrency, async (job) => {
    try {
      const items = await client.resourcesOf(job.descriptor.kind, { projectId: job.projectId }).listAll();
      for (const item of items) add(job.descriptor, job.project, job.projectId, item as LiveObject);
      state.listed.add(collectionKey(job.descriptor.kind, job.project));
    } catch (err) {
      // A kind the config does not use, that this credential may not read: not fatal for drift and prune.
      // A kind it uses but may not read (users or SSO providers with a project API key) is planned
      // as absent and never pruned (not in `listed`): writing a kind needs at least the permission
      // to read it, so each create is refused by the service, per resource, instead of the whole plan.
      const used = documents.some((d) => d.descriptor.kind === job.descriptor.kind);
      if (err instanceof ApiError && (err.status === 403 || (!used && err.status === 404))) {
        state.warnings.push(`cannot list ${job.descriptor.kind}${job.project ? ` in project ${job.project}` : ''}: ${err.serverMessage}`);
        return;
      }
      throw err;
    }
  });
  return state;
}
