import type { Run } from '../../kinds/generated/kinds.js';
import type { Queryable } from '../store/db.js';
import type { StoredResource } from '../store/resources.js';
import { lockRow } from '../writes.js';
import { newId } from '../ids.js';
import { notFound } from '../errors.js';
import { META, Stopped, type Runtime } from './runtime.js';
import { PROGRESS_DUTY, progressTurnsOf } from './tenant-work.js';

/** A run as the API returns it: the generated type of schemas/kinds/run.schema.json (every field is always present). */
export type RunData = Run & { [key: string]: unknown };
export type RunType = Run['run_type'];
export type RunStatus = Run['status'];
export type Trigger = Run['trigger'];
export type TableResult = Run['tables'][number];
export type StepResult = Run['steps'][number];
export type ModelResult = Run['models'][number];
export type ChangeResult = Run['changes'][number];
/** Steps, models, tables and changes share one small state machine. */
export type UnitStatus = StepResult['status'];
/** What every unit of work (table, step, model, change) has. */
export type Unit = Pick<StepResult, 'status' | 'started_at' | 'finished_at' | 'duration_seconds' | 'error'>;

/**
 * A step_update's `duration_seconds`, which the spec types as a number (section 6): a step that has
 * just started, or was skipped without running, has taken 0 s (the run record keeps null for "not
 * ended"; a client decoding the stream to the spec's type rejected the null of every first message).
 */
export const streamedDuration = (seconds: number | null | undefined): number => seconds ?? 0;

export const pendingUnit = (): Unit => ({ status: 'pending', started_at: null, finished_at: null, duration_seconds: null, error: null });

/** Seconds between two ISO timestamps, to the millisecond. */
export const secondsBetween = (from: string, to: string) => Math.max(0, Math.round(Date.parse(to) - Date.parse(from)) / 1000);

/**
 * Runs fn in a transaction that holds the project's row lock (the lock every write in a project
 * takes, see writes.ts), so runtime state changes and API writes of the same project never interleave.
 * `share` (PostgreSQL; SQLite runs one write at a time anyway): transactions that each write rows of
 * their own and read nothing another writes may run together; an API write or a delete of the
 * project, which lock it exclusively, still waits for them and they for it.
 */
export async function inProject<T>(
  rt: Runtime,
  tenantId: string,
  projectId: string,
  fn: (q: Queryable) => Promise<T>,
  mode: 'update' | 'share' = 'update',
): Promise<T> {
  return rt.ctx.db.tx(async (q) => {
    if (!(await lockRow(rt.ctx, q, tenantId, projectId, mode))) throw notFound('Project');
    return fn(q);
  });
}

/**
 * Changes a stored resource's computed fields (status, last run, last error) in place under the
 * caller's transaction (ResourceStore.updateComputed: nothing else is written); a resource deleted
 * meanwhile is left alone.
 */
export async function updateResource(
  rt: Runtime,
  q: Queryable,
  tenantId: string,
  projectId: string,
  kind: string,
  id: string,
  mutate: (data: Record<string, unknown>) => void,
): Promise<StoredResource | undefined> {
  const found = await rt.ctx.resources.get(tenantId, projectId, kind, id, q);
  if (!found) return undefined;
  mutate(found.data);
  await rt.ctx.resources.updateComputed(found, q);
  return found;
}

export interface NewRun {
  tenantId: string;
  projectId: string;
  /** The connector, pipeline or dbt project (the project itself for infrastructure applies). */
  parentId: string;
  runType: RunType;
  trigger: Trigger;
  parentRunId?: string | null;
  simulated: boolean;
  planId?: string | null;
  tables?: TableResult[];
  steps?: StepResult[];
  models?: ModelResult[];
  changes?: ChangeResult[];
}

/**
 * Inserts a running run and registers it as executed by this instance (in `meta`), inside the
 * caller's transaction, so a run and its claim appear together or not at all.
 */
export async function insertRun(rt: Runtime, q: Queryable, r: NewRun): Promise<StoredResource> {
  const id = newId('run');
  const data: RunData = {
    id,
    project_id: r.projectId,
    run_type: r.runType,
    resource_id: r.parentId,
    status: 'running',
    trigger: r.trigger,
    parent_run_id: r.parentRunId ?? null,
    simulated: r.simulated,
    started_at: rt.now(),
    finished_at: null,
    duration_seconds: null,
    error: null,
    plan_id: r.planId ?? null,
    tables: r.tables ?? [],
    steps: r.steps ?? [],
    models: r.models ?? [],
    changes: r.changes ?? [],
  };
  const stored: Omit<StoredResource, 'seq'> = {
    id,
    tenantId: r.tenantId,
    projectId: r.projectId,
    kind: 'run',
    parentId: r.parentId,
    name: id,
    data,
    secrets: null,
  };
  await rt.ctx.resources.insert(stored, q);
  await q.run('INSERT INTO meta (key, value) VALUES (?, ?)', [
    META.run(id),
    JSON.stringify({ instance: rt.instanceId, tenant_id: r.tenantId, project_id: r.projectId }),
  ]);
  await pruneHistory(rt, q, r);
  return { ...stored, seq: 0 };
}

/**
 * Keeps a resource's run history to the newest `runHistory` runs (--run-history): the finished
 * runs older than those are deleted as a new one starts, with two statements on the listing index
 * (find the cut, delete below it), so a run's cost does not grow with the history, and neither
 * does anything that looks at a resource's runs (the running-run check, failure counts, lists).
 */
async function pruneHistory(rt: Runtime, q: Queryable, r: NewRun): Promise<void> {
  const keep = rt.ctx.options.runHistory;
  if (!keep) return;
  await rt.ctx.resources.pruneChildren(
    { tenantId: r.tenantId, projectId: r.projectId, kind: 'run', parentId: r.parentId },
    keep,
    'running',
    q,
  );
}

/**
 * Is there a run of this resource still running? (Callers hold the project lock.) Only the newest
 * run can be: every run starts under the project lock after this check (a connector's, after its
 * `syncing` status), so none starts while another runs. Reading that one run replaces a filter on
 * `status` that SQLite evaluated by parsing every run of the history (1,000 runs of up to 2 MB).
 */
export async function runningRunOf(
  rt: Runtime,
  q: Queryable,
  tenantId: string,
  projectId: string,
  parentId: string,
): Promise<StoredResource | undefined> {
  const newest = await rt.ctx.resources.newestChild({ tenantId, projectId, kind: 'run', parentId }, q);
  return newest?.data.status === 'running' ? newest : undefined;
}

/** How progress writes of a run are made; see RunRecorder.save. */
export interface RecorderOptions {
  /**
   * 'each' (default): every save writes the run and resolves when it is written.
   * 'coalesced': save only marks the run changed; one write, of the latest state, follows
   * later (see PROGRESS_MIN_MS), so N unit changes cost a bounded number of O(N) writes instead
   * of N of them (a 1,000-step pipeline made 3,000 writes of the whole run, quadratic).
   */
  progress?: 'each' | 'coalesced';
}

/** Coalesced progress is written at most this often... */
export const PROGRESS_MIN_MS = 50;
// ...and, when writes are slow (a big run), with at least PROGRESS_DUTY times a write's own time between two (tenant-work.ts).

/**
 * Drives one run's record: progress writes are serialised (steps of a pipeline finish
 * concurrently) and stop for good when the runtime stops, so a stopped process writes nothing more.
 */
export class RunRecorder {
  private chain: Promise<void> = Promise.resolve();
  private flushTimer?: NodeJS.Timeout;
  /** A coalesced write is scheduled or waiting for its turn (and has not started). */
  private flushDue = false;
  /** finish() has begun: its write carries every change, and no progress write follows. */
  private ended = false;
  private lastWriteMs = 0;
  /** The number of the last event announced about this run (coalesced progress); see announce. */
  private seq = 0;
  /** The highest of those numbers that a finished write has stored. */
  private storedSeq = 0;

  constructor(
    readonly rt: Runtime,
    readonly stored: StoredResource,
    readonly signal: AbortSignal,
    readonly options: RecorderOptions = {},
  ) {}

  get data(): RunData {
    return this.stored.data as RunData;
  }

  get id(): string {
    return this.stored.id;
  }

  /** Throws Stopped when the service is stopping: the caller must not go on. */
  check(): void {
    if (this.signal.aborted) throw new Stopped();
  }

  /** Writes the run as it is now (after what was queued before); coalesced, schedules that write and returns at once. */
  save(): Promise<void> {
    if (this.options.progress !== 'coalesced') return this.write(structuredClone(this.stored));
    if (this.flushDue || this.ended) return Promise.resolve();
    this.flushDue = true;
    // When due, the write waits its turn among the tenant's (tenant-work.ts); changes made until it starts go in it.
    this.flushTimer = setTimeout(
      () => {
        this.flushTimer = undefined;
        progressTurnsOf(this.rt).enqueue(this.stored.tenantId, () => this.flush());
      },
      Math.max(PROGRESS_MIN_MS, this.lastWriteMs * PROGRESS_DUTY),
    ).unref();
    return Promise.resolve();
  }

  /** The coalesced write, at its turn: false when there was nothing to write (the run ended first). */
  private async flush(): Promise<boolean> {
    if (!this.flushDue || this.ended) return false;
    this.flushDue = false;
    await this.write().catch((err) => this.rt.log?.error({ err, runId: this.id }, 'writing run progress failed'));
    return true;
  }

  /**
   * Announces a change just made to the run: `emit` sends its event at once, with a number.
   *
   * With 'each' progress, save already wrote the change: the number is undefined (nothing to
   * wait for). Coalesced, the change reaches the store with the next write, up to
   * PROGRESS_MIN_MS or more later; sending the event only after that write would delay every
   * stream message by as much. So the event goes out now, numbered (1, 2, ... per run), and
   * each write that stores changes is followed by `run_stored` (tenantId, { parent_id, run_id,
   * seq }): every event numbered up to seq is in the store from then on. A stream subscriber
   * catches up from the stored run plus the events announced and not yet stored (the streams
   * keep those until their run_stored, see streams/index.ts), so an event sent before its state
   * is stored is never missed by a late subscriber.
   */
  announce(emit: (seq: number | undefined) => void): void {
    emit(this.options.progress === 'coalesced' ? ++this.seq : undefined);
  }

  /** After a write that stored the events numbered up to `upTo`: tells the streams (see announce). */
  private markStored(tenantId: string, upTo: number): void {
    if (upTo <= this.storedSeq) return;
    this.storedSeq = upTo;
    this.rt.events.emit('run_stored', tenantId, { parent_id: this.stored.parentId, run_id: this.id, seq: upTo });
  }

  /** Writes `taken` (a copy made at the save), or a copy of the run as it is when the write starts. */
  private write(taken?: StoredResource): Promise<void> {
    const write = this.chain.then(async () => {
      if (this.signal.aborted) return;
      const started = performance.now();
      // Every event announced so far describes a change the snapshot holds.
      const upTo = this.seq;
      const snapshot = taken ?? structuredClone(this.stored);
      await this.rt.ctx.resources.update(snapshot);
      this.markStored(snapshot.tenantId, upTo);
      this.rt.events.emit('run_update', snapshot.tenantId, snapshot.data);
      this.lastWriteMs = performance.now() - started;
    });
    this.chain = write.catch(() => undefined);
    return write;
  }

  /** Marks a unit running and saves. */
  async begin(unit: Unit): Promise<void> {
    this.check();
    unit.status = 'running';
    unit.started_at = this.rt.now();
    await this.save();
  }

  /** Ends a unit; `durationSeconds` overrides the measured one (simulated work reports its nominal time). */
  async end(unit: Unit, status: 'completed' | 'failed', error: string | null = null, durationSeconds?: number): Promise<void> {
    this.check();
    unit.status = status;
    unit.finished_at = this.rt.now();
    unit.duration_seconds = durationSeconds ?? secondsBetween(unit.started_at ?? unit.finished_at, unit.finished_at);
    unit.error = error;
    await this.save();
  }

  /**
   * Ends the run: its final state, what the run changes on its resource (`onParent`, same
   * transaction) and the release of its claim in `meta` commit together.
   */
  async finish(status: 'succeeded' | 'failed', error: string | null, onParent?: (q: Queryable) => Promise<void>): Promise<RunData> {
    this.check();
    // The final write below carries every change: a coalesced progress write still pending is moot.
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    this.ended = true;
    await this.chain;
    this.check();
    const upTo = this.seq;
    const data = this.data;
    data.status = status;
    data.error = error;
    data.finished_at = this.rt.now();
    data.duration_seconds = secondsBetween(data.started_at, data.finished_at);
    const { tenantId, projectId } = this.stored;
    try {
      await inProject(this.rt, tenantId, projectId, async (q) => {
        await this.rt.ctx.resources.update(this.stored, q);
        await onParent?.(q);
        await q.run('DELETE FROM meta WHERE key = ?', [META.run(this.id)]);
      });
    } catch (err) {
      // The project was deleted while the run ran: its records went with it.
      if ((err as { code?: string }).code !== 'resource_not_found') throw err;
      await this.rt.ctx.db.run('DELETE FROM meta WHERE key = ?', [META.run(this.id)]);
    }
    this.markStored(tenantId, upTo);
    this.rt.events.emit('run_update', tenantId, data);
    return structuredClone(data);
  }
}

/** Unit statuses after a failure elsewhere: what never started is skipped. */
export function skipPending(units: Unit[]): void {
  for (const u of units) if (u.status === 'pending') u.status = 'skipped';
}

/**
 * Runs an executor; an unexpected failure (a bug, the store failing) ends the run failed with
 * an internal error instead of leaving it running. `onParent` then puts its resource right.
 */
export async function guarded(rec: RunRecorder, fn: () => Promise<RunData>, onParent: (q: Queryable) => Promise<void>): Promise<RunData> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof Stopped || rec.signal.aborted) throw new Stopped();
    rec.rt.log?.error({ err, runId: rec.id }, 'run failed with an internal error');
    for (const list of [rec.data.tables, rec.data.steps, rec.data.models, rec.data.changes] as Unit[][]) {
      for (const u of list) if (u.status === 'running') u.status = 'failed';
      skipPending(list);
    }
    return rec.finish('failed', 'internal error while running; see the service log', onParent);
  }
}
