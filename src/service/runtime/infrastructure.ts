import { createHash } from 'node:crypto';
import { kind } from '../../kinds/index.js';
import { canonicalJson } from '../../kinds/canonical.js';
import type { Queryable } from '../store/db.js';
import type { ResourceStore, StoredResource } from '../store/resources.js';
import type { Draft, WriteContext } from '../behaviours/types.js';
import { conflict } from '../errors.js';
import { META, type Runtime } from './runtime.js';
import {
  guarded,
  inProject,
  insertRun,
  pendingUnit,
  RunRecorder,
  runningRunOf,
  secondsBetween,
  updateResource,
  type ChangeResult,
  type RunData,
} from './runs.js';
import { hash32 } from './sources.js';
import { regionProblem } from './cloud-regions.js';
import { slicer, yieldToLoop } from './slices.js';
import { GroupCommit } from './group-commit.js';

/**
 * Infrastructure plan and apply. Desired: the infrastructure resources as configured through the
 * API. Provisioned: a snapshot of what the applies have provisioned (the `after` of each applied
 * change), one row per resource. A plan is the difference; applying it provisions (simulated) and
 * records each change in its row, so planning again right after an apply finds nothing to do.
 */

const STATE_KIND = 'infrastructure_state';
/** A provisioned resource's row in the snapshot (its name is the resource's id). */
const stateId = (resourceId: string) => `ifs_${resourceId}`;
/**
 * Before, one row held the whole project's snapshot and every applied change rewrote it: an apply
 * of N changes cost N^2 (1,000 buckets: 4.5 s of CPU). Such a row is still read, and is split into
 * rows per resource by the first change applied under the project's lock.
 */
const LEGACY_NAME = 'provisioned';

/** The fields a plan compares: what a user declares (every non-computed field of the kind). */
const FIELDS = Object.keys(kind('infrastructure_resource').createSchema.properties ?? {});

type Declared = Record<string, unknown>;
interface Snapshot {
  resources: Record<string, Declared>;
}
/** The single row of a project's snapshot, as stored before rows per resource (LEGACY_NAME). */
interface LegacySnapshot {
  resources?: Record<string, Declared>;
}

export interface PlannedChange {
  action: 'create' | 'update' | 'delete';
  resource_id: string;
  name: string;
  resource_type: string;
  changed_fields: string[];
  before: Declared | null;
  after: Declared | null;
}

export interface Plan {
  plan_id: string;
  fingerprint: string;
  project_id: string;
  generated_at: string;
  summary: { create: number; update: number; delete: number; unchanged: number };
  changes: PlannedChange[];
}

const declared = (data: Record<string, unknown>): Declared =>
  Object.fromEntries(FIELDS.filter((f) => data[f] !== undefined).map((f) => [f, structuredClone(data[f])]));

/** Rows a plan reads per statement: with a pause between pages, no read holds the event loop for a whole project. */
const PLAN_PAGE = 500;

/** A point where a plan may yield to the event loop (slices.ts), or undefined when it may not. */
type Pause = () => Promise<void> | undefined;

/** Every resource of one kind in the project, a page at a time, pausing between pages. */
async function readAll(rt: Runtime, q: Queryable, tenantId: string, projectId: string, kindName: string, pause: Pause) {
  const out: StoredResource[] = [];
  for await (const page of rt.ctx.resources.pages({ tenantId, projectId, kind: kindName }, PLAN_PAGE, q)) {
    out.push(...page);
    await pause();
  }
  return out;
}

/** What the applies have provisioned, by resource id. Reads only (a plan writes nothing). */
async function loadSnapshot(rt: Runtime, q: Queryable, tenantId: string, projectId: string, pause: Pause): Promise<Snapshot> {
  const rows = await readAll(rt, q, tenantId, projectId, STATE_KIND, pause);
  const legacy = rows.find((r) => r.name === LEGACY_NAME);
  const resources: Record<string, Declared> = { ...((legacy?.data as unknown as LegacySnapshot | undefined)?.resources ?? {}) };
  for (const r of rows) if (r !== legacy) resources[r.name] = r.data;
  return { resources };
}

/** Splits a project's single snapshot row into rows per resource (callers hold the project lock). */
async function splitLegacySnapshot(rt: Runtime, q: Queryable, tenantId: string, projectId: string): Promise<void> {
  const legacy = await rt.ctx.resources.getByName(tenantId, projectId, STATE_KIND, LEGACY_NAME, q);
  if (!legacy) return;
  for (const [resourceId, declared] of Object.entries((legacy.data as unknown as LegacySnapshot).resources ?? {}))
    await putProvisioned(rt, q, tenantId, projectId, resourceId, declared);
  await rt.ctx.resources.delete(legacy, q);
}

async function putProvisioned(rt: Runtime, q: Queryable, tenantId: string, projectId: string, resourceId: string, declared: Declared) {
  const row = await rt.ctx.resources.get(tenantId, projectId, STATE_KIND, stateId(resourceId), q);
  if (row) return rt.ctx.resources.update({ ...row, data: declared }, q);
  return rt.ctx.resources.insert(stateRow(tenantId, projectId, resourceId, declared), q);
}

/** What the applies provisioned of one resource; undefined when none has (a legacy snapshot row is read too). */
async function provisionedOf(resources: ResourceStore, q: Queryable, tenantId: string, projectId: string, resourceId: string) {
  const row = await resources.get(tenantId, projectId, STATE_KIND, stateId(resourceId), q);
  if (row) return row.data;
  const legacy = await resources.getByName(tenantId, projectId, STATE_KIND, LEGACY_NAME, q);
  return (legacy?.data as unknown as LegacySnapshot | undefined)?.resources?.[resourceId];
}

/**
 * A PATCH's effect on the status (the kind's beforeUpdate): a provisioned resource whose
 * configuration now differs from what was provisioned is `pending` until an apply provisions the
 * change; one put back to what was provisioned is `provisioned` again (so is a failed update put
 * back). It stayed `provisioned` (healthy) while its change waited, so a change that reached the
 * platform but no apply (an apply stopped after its PATCH, dpctl adopt's label write, a PATCH by
 * hand) showed in no plan and no apply made it. A resource never provisioned keeps its status;
 * one being provisioned too: its change's end compares (recordEnds).
 */
export async function statusAfterChange(draft: Draft, existing: StoredResource, w: WriteContext): Promise<void> {
  const status = existing.data.status;
  if (status === 'provisioning' || status === 'updating') return;
  const provisioned = await provisionedOf(w.ctx.resources, w.q, w.tenantId, w.projectId, existing.id);
  if (provisioned === undefined) return;
  const same = canonicalJson(declared(draft.data)) === canonicalJson(provisioned);
  if (!same && status === 'provisioned') Object.assign(draft.data, { status: 'pending', last_error: null });
  else if (same && status !== 'provisioned') Object.assign(draft.data, { status: 'provisioned', last_error: null });
}

/** A provisioned resource's new row in the snapshot. */
const stateRow = (tenantId: string, projectId: string, resourceId: string, declared: Declared) => ({
  id: stateId(resourceId),
  tenantId,
  projectId,
  kind: STATE_KIND,
  parentId: '',
  name: resourceId,
  data: declared,
  secrets: null,
});

/** A change of an apply at its end: done, or refused by the simulated cloud (`problem`). */
interface ChangeEnd {
  change: PlannedChange;
  problem: string | null;
}

/**
 * Records changes that ended: each applied one in its own snapshot row (written or deleted), and each
 * resource's status (provisioned, or failed with the reason). Callers hold the project lock, shared
 * (the apply split a legacy single-row snapshot when it started). The rows are read a statement per
 * kind for all the changes, new snapshot rows written together.
 */
async function recordEnds(rt: Runtime, q: Queryable, tenantId: string, projectId: string, ends: ChangeEnd[]): Promise<void> {
  const { resources } = rt.ctx;
  const kept = ends.filter((e) => e.change.action !== 'delete').map((e) => e.change.resource_id);
  const snapshot = await resources.getMany(
    tenantId,
    projectId,
    STATE_KIND,
    ends.map((e) => stateId(e.change.resource_id)),
    q,
  );
  const live = await resources.getMany(tenantId, projectId, 'infrastructure_resource', kept, q);
  const fresh: ReturnType<typeof stateRow>[] = [];
  for (const { change, problem } of ends) {
    const row = snapshot.get(stateId(change.resource_id));
    if (problem) {
      // Refused: the snapshot stays as it was, so the next plan proposes the change again.
    } else if (change.action === 'delete') {
      if (row) await resources.delete(row, q);
    } else if (row) await resources.update({ ...row, data: change.after! }, q);
    else fresh.push(stateRow(tenantId, projectId, change.resource_id, change.after!));
    const resource = live.get(change.resource_id); // none for a delete, or a resource deleted since the plan
    if (resource) {
      // Changed again while this apply ran: what it provisioned is not what is configured now.
      const changedSince = !problem && canonicalJson(declared(resource.data)) !== canonicalJson(change.after);
      Object.assign(
        resource.data,
        problem ? { status: 'failed', last_error: problem } : { status: changedSince ? 'pending' : 'provisioned', last_error: null },
      );
      await resources.update(resource, q);
    }
  }
  await resources.insertMany(fresh, q);
}

/**
 * The plan for a project now (callers that act on it hold the project lock). `pause` lets a caller
 * outside a transaction yield to the event loop between pages and resources: a project holds up to
 * 5,000 infrastructure resources (x-max-per-scope), about 100 ms of work in one piece. Inside a
 * SQLite transaction nothing may yield: another request would read the transaction's rows.
 */
export async function computePlan(
  rt: Runtime,
  q: Queryable,
  tenantId: string,
  projectId: string,
  pause: Pause = () => undefined,
): Promise<{ plan: Plan; resources: StoredResource[] }> {
  const resources = await readAll(rt, q, tenantId, projectId, 'infrastructure_resource', pause);
  const snapshot = await loadSnapshot(rt, q, tenantId, projectId, pause);
  const desired: Record<string, Declared> = {};
  const changes: PlannedChange[] = [];
  let unchanged = 0;
  for (const r of resources) {
    await pause();
    const after = (desired[r.id] = declared(r.data));
    const before = snapshot.resources[r.id];
    if (!before) {
      changes.push({
        action: 'create',
        resource_id: r.id,
        name: r.name,
        resource_type: String(after.resource_type),
        changed_fields: Object.keys(after),
        before: null,
        after,
      });
      continue;
    }
    const changed = [...new Set([...Object.keys(before), ...Object.keys(after)])].filter(
      (f) => canonicalJson(before[f]) !== canonicalJson(after[f]),
    );
    if (changed.length)
      changes.push({
        action: 'update',
        resource_id: r.id,
        name: r.name,
        resource_type: String(after.resource_type),
        changed_fields: changed,
        before,
        after,
      });
    else unchanged++;
  }
  const gone = Object.entries(snapshot.resources)
    .filter(([id]) => !desired[id])
    .sort(([, a], [, b]) => String(a.name).localeCompare(String(b.name)));
  for (const [id, before] of gone)
    changes.push({
      action: 'delete',
      resource_id: id,
      name: String(before.name),
      resource_type: String(before.resource_type),
      changed_fields: Object.keys(before),
      before,
      after: null,
    });
  const fingerprint = await fingerprintOf(desired, snapshot.resources, pause);
  const count = (a: PlannedChange['action']) => changes.filter((c) => c.action === a).length;
  return {
    plan: {
      plan_id: `plan_${fingerprint.slice(0, 24)}`,
      fingerprint,
      project_id: projectId,
      generated_at: rt.now(),
      summary: { create: count('create'), update: count('update'), delete: count('delete'), unchanged },
      changes,
    },
    resources,
  };
}

/** The same desired and provisioned resources always give the same fingerprint: each entry hashed in id order. */
async function fingerprintOf(desired: Record<string, Declared>, provisioned: Record<string, Declared>, pause: Pause): Promise<string> {
  const hash = createHash('sha256');
  for (const side of [desired, provisioned]) {
    // A JSON value never holds a raw NUL, so the two sides cannot run into each other.
    hash.update('\0');
    for (const id of Object.keys(side).sort()) {
      hash.update(canonicalJson([id, side[id]]));
      await pause();
    }
  }
  return hash.digest('hex');
}

/** A plan outside any transaction: it yields to the event loop every 10 ms of work. */
export async function planInfrastructure(rt: Runtime, tenantId: string, projectId: string): Promise<Plan> {
  return (await computePlan(rt, rt.ctx.db, tenantId, projectId, slicer())).plan;
}

/** Nominal seconds (time scale 1) a simulated change takes: by resource type, plus up to 0.9 s from a hash of the name. */
const CREATE_SECONDS: Record<string, number> = { warehouse: 3, bucket: 1, cluster: 5, database: 2, network: 2 };
export function changeSeconds(c: Pick<PlannedChange, 'action' | 'resource_type' | 'name'>): number {
  const base = CREATE_SECONDS[c.resource_type] ?? 2;
  const jitter = (hash32(`infra:${c.name}`) % 10) / 10;
  return c.action === 'create' ? base + jitter : c.action === 'update' ? base / 2 + jitter : 1 + jitter;
}

export interface ApplyStarted {
  run: RunData;
  plan: Plan;
  done: Promise<RunData | undefined>;
}

/**
 * Applies the current plan. With `planId`, that plan must still be the current one: anything
 * changed since (a resource, or another apply) makes it stale, 409. One apply per project at a time (409).
 * Resources to create go provisioning, resources to update go updating; each becomes provisioned
 * when its (simulated) change is done and recorded in the snapshot. Up to APPLY_PARALLELISM changes run at once.
 */
export async function applyInfrastructure(
  rt: Runtime,
  o: { tenantId: string; projectId: string; planId?: string; inTx?: (q: Queryable) => Promise<void> },
): Promise<ApplyStarted> {
  const slot = rt.runSlots.take(o.tenantId);
  const { stored, plan, resources } = await inProject(rt, o.tenantId, o.projectId, async (q) => {
    await o.inTx?.(q);
    const running = await runningRunOf(rt, q, o.tenantId, o.projectId, o.projectId);
    if (running) throw conflict(`An infrastructure apply is already running (run ${running.id}); wait for it to end, then plan again`);
    // Under the exclusive lock, before the changes, which then each write only their own snapshot row.
    await splitLegacySnapshot(rt, q, o.tenantId, o.projectId);
    const { plan, resources } = await computePlan(rt, q, o.tenantId, o.projectId);
    if (o.planId !== undefined && o.planId !== plan.plan_id) {
      throw conflict(
        `Plan ${o.planId} is stale: the infrastructure changed since it was made (the current plan is ${plan.plan_id}); plan again and review the changes`,
      );
    }
    const changes: ChangeResult[] = plan.changes.map((c) => ({
      resource_id: c.resource_id,
      name: c.name,
      action: c.action,
      ...pendingUnit(),
    }));
    const stored = await insertRun(rt, q, {
      tenantId: o.tenantId,
      projectId: o.projectId,
      parentId: o.projectId,
      runType: 'infrastructure_apply',
      trigger: 'manual',
      simulated: true,
      planId: plan.plan_id,
      changes,
    });
    if (!changes.length) {
      // Nothing to do: the run ends as it starts.
      const data = stored.data as RunData;
      data.status = 'succeeded';
      data.finished_at = data.started_at;
      data.duration_seconds = secondsBetween(data.started_at, data.finished_at);
      await rt.ctx.resources.update(stored, q);
      await q.run('DELETE FROM meta WHERE key = ?', [META.run(stored.id)]);
    }
    return { stored, plan, resources };
  }).catch(slot.failedToStart);
  await markStatuses(rt, o.tenantId, o.projectId, plan, resources).catch(slot.failedToStart);
  const data = stored.data as RunData;
  if (data.status !== 'running') {
    slot.release();
    return { run: structuredClone(data), plan, done: Promise.resolve(structuredClone(data)) };
  }
  const done = rt.execute(stored.id, slot, (signal) => {
    // Coalesced: each change's progress rewrote the whole run (every change in it), N times.
    const rec = new RunRecorder(rt, stored, signal, { progress: 'coalesced' });
    return guarded(
      rec,
      () => runApply(rt, rec, plan),
      (q) => failResources(rt, q, rec),
    );
  });
  return { run: structuredClone(data), plan, done };
}

/** Resources whose status one transaction of markStatuses sets. */
const MARK_BATCH = 200;

/**
 * Sets each resource's status for the apply that just started: provisioning or updating when the
 * plan changes it, provisioned when it does not (this also settles one an interrupted apply left
 * failed). In transactions of MARK_BATCH with a turn of the event loop between them, before the
 * apply's changes begin: one transaction for the whole project held every tenant's requests for
 * 0.5 s at 5,000 resources. Each resource is read again under the lock, so a change made since the
 * plan is kept.
 */
async function markStatuses(rt: Runtime, tenantId: string, projectId: string, plan: Plan, resources: StoredResource[]) {
  const planned = new Map(plan.changes.map((c) => [c.resource_id, c.action]));
  const statusOf = (r: StoredResource) => {
    const action = planned.get(r.id);
    return action === 'create' ? 'provisioning' : action === 'update' ? 'updating' : 'provisioned';
  };
  const stale = resources.filter((r) => r.data.status !== statusOf(r));
  for (let start = 0; start < stale.length; start += MARK_BATCH) {
    if (start) await yieldToLoop();
    await inProject(rt, tenantId, projectId, async (q) => {
      const ids = stale.slice(start, start + MARK_BATCH).map((r) => r.id);
      const current = await rt.ctx.resources.getMany(tenantId, projectId, 'infrastructure_resource', ids, q);
      for (const r of current.values()) {
        Object.assign(r.data, { status: statusOf(r), last_error: null });
        await rt.ctx.resources.update(r, q);
      }
    });
  }
}

/**
 * Changes of one apply in flight at once, as Terraform's default `-parallelism`. All at once, the
 * changes of a large plan ended together and their transactions ran back to back: 5,000 buckets
 * held every tenant's requests for 0.6 s.
 */
export const APPLY_PARALLELISM = 10;

async function runApply(rt: Runtime, rec: RunRecorder, plan: Plan): Promise<RunData> {
  const { tenantId, projectId } = rec.stored;
  // The changes write rows of their own (the resource, its snapshot row): they share the project's
  // lock, and those that end together are recorded in one transaction. Exclusively and one per
  // transaction, 1,000 changes took 7.5 s on PostgreSQL (0.9 s on SQLite).
  const ends = new GroupCommit<ChangeEnd>((batch) =>
    inProject(rt, tenantId, projectId, (q) => recordEnds(rt, q, tenantId, projectId, batch), 'share'),
  );
  const failures: (string | null)[] = plan.changes.map(() => null);
  let next = 0;
  const worker = async () => {
    while (next < plan.changes.length) {
      const i = next++;
      // Each change starts on a turn of the event loop of its own, after pending I/O.
      await yieldToLoop();
      failures[i] = await applyChange(rt, rec, ends, plan.changes[i], rec.data.changes[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(APPLY_PARALLELISM, plan.changes.length) }, worker));
  const failed = failures.filter((f): f is string => f !== null);
  if (!failed.length) return rec.finish('succeeded', null);
  return rec.finish('failed', `${failed.length} of ${plan.changes.length} changes failed: ${failed.join('; ')}`);
}

/**
 * One change of an apply: simulated work, then the snapshot and the resource's status change
 * together (recordEnds). A change the simulated cloud refuses (an unknown region) leaves the snapshot
 * as it was, so the next plan proposes it again, and marks the resource failed with the reason.
 * Returns the failure, or null.
 */
async function applyChange(
  rt: Runtime,
  rec: RunRecorder,
  ends: GroupCommit<ChangeEnd>,
  change: PlannedChange,
  unit: ChangeResult,
): Promise<string | null> {
  await rec.begin(unit);
  const problem = change.after ? regionProblem(String(change.after.provider), String(change.after.region)) : null;
  // A refusal comes quickly: the cloud checks the request before it provisions anything.
  const seconds = problem ? 1 : changeSeconds(change);
  await rt.simulate(seconds, rec.signal);
  rec.check();
  await ends.add({ change, problem });
  await rec.end(unit, problem ? 'failed' : 'completed', problem, seconds);
  return problem && `${change.name}: ${problem}`;
}

/** After an apply failed or was interrupted: what it was provisioning or updating is failed (the next apply retries it). */
export async function failResources(rt: Runtime, q: Queryable, rec: { stored: StoredResource; data: RunData }): Promise<void> {
  const { tenantId, projectId } = rec.stored;
  for (const c of rec.data.changes) {
    if (c.action === 'delete' || c.status === 'completed') continue;
    await updateResource(rt, q, tenantId, projectId, 'infrastructure_resource', c.resource_id, (d) => {
      if (d.status === 'provisioning' || d.status === 'updating')
        Object.assign(d, { status: 'failed', last_error: rec.data.error ?? 'the infrastructure apply was interrupted' });
    });
  }
}
