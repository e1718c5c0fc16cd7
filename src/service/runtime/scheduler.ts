import { latestTickAt, nextTickAfter } from '../../kinds/cron.js';
import { SCHEDULED_KINDS, putSchedule, scheduleOf } from '../store/schedules.js';
import { freshnessRuleCondition } from '../store/migrations.js';
import { ApiError } from '../errors.js';
import type { Runtime } from './runtime.js';
import { startConnectorSync } from './connectors.js';
import { startPipelineRun } from './pipelines.js';
import { Alerting, type RuleData } from './alerts.js';
import { escalate } from './escalation.js';
import { backfillOnce } from './backfill.js';
import { slicer, yieldToLoop } from './slices.js';
import { runtimeWorker } from './workers.js';

/**
 * The scheduler loop of one service process. Every SCHEDULER_INTERVAL_MS (at time scale 1;
 * divided by the time scale, at least MIN_INTERVAL_MS) it looks at the service clock and:
 *
 * 1. starts the runs whose cron `schedule` is due (connectors, and pipelines that are `enabled`:
 *    every kind with an `x-format: cron` field, see store/schedules.ts), with `trigger: schedule`.
 *    It never looks at a resource that is not due: each scheduled resource has a row in
 *    `schedules` with its next tick and due time (tick + a stable spread of 0-59 s), and a look
 *    reads `WHERE next_due_at <= now ORDER BY next_due_at LIMIT SCHEDULE_BATCH`, in batches, yielding
 *    to the event loop between batches and in slices (slices.ts).
 *    A due row is claimed by moving it to its next tick (`UPDATE ... WHERE tick = <the tick read>`:
 *    of several replicas only one moves it), then the tick is claimed once more as before with an
 *    INSERT into `schedule_ticks` (primary key resource_id + tick, ON CONFLICT DO NOTHING) that
 *    records the outcome: `started` (run_id) or `skipped` (detail: e.g. the connector is still
 *    syncing, the pipeline is still running).
 *    If the clock moved past several ticks since the row's tick, only the latest one runs.
 *    Ticks that were due while the service was down are not back-filled: the first look after a
 *    start only runs ticks due after the start. A tick before the resource was created (or before its
 *    schedule was last changed) is never due.
 *    Claimed ticks go through a bounded queue (RunQueue): at most MAX_STARTING_PER_TENANT run starts
 *    of one tenant and MAX_STARTING overall at a time; at most MAX_QUEUED ticks wait, and at most
 *    MAX_QUEUED_PER_TENANT of one tenant, whose further due rows stay due (unclaimed) for a later look,
 *    so one tenant's wave cannot hold the queue. A tenant with as many runs executing as it may have
 *    (`--max-runs-per-tenant`, run-slots.ts) is left out the same way, and a tick of it already queued
 *    is handed back to due: when one of its runs ends, the next look starts its latest due tick.
 *    While a tenant is left out so, a look reads tenant by tenant (the one waiting longest first), so
 *    its due rows are not read at all.
 * 2. evaluates the enabled `freshness_minutes` alert rules, once per minute of the service clock;
 * 3. escalates the firing alerts that are due (escalation.ts), never scanning the others.
 *
 * Alert rules on runs are evaluated when a run ends (the runtime's `run_update` event).
 */
export const SCHEDULER_INTERVAL_MS = 5_000;
export const MIN_INTERVAL_MS = 20;
/** Due rows read per query. */
export const SCHEDULE_BATCH = 100;
/** Run starts in progress at once: per tenant, and overall. */
export const MAX_STARTING_PER_TENANT = 10;
export const MAX_STARTING = 100;
/** Claimed ticks waiting to start: overall, and per tenant. */
export const MAX_QUEUED = 1_000;
export const MAX_QUEUED_PER_TENANT = 200;
/** Tenants read per query when the look goes tenant by tenant (Scheduler.dueByTenant). */
const TENANT_PAGE = 500;
/** Alert rules read per query by a freshness look. */
const RULE_PAGE = 100;

/** The latest tick of a five-field UTC cron expression at or before `atMs`. */
export function latestTick(expression: string, atMs: number): number {
  return latestTickAt(expression, atMs);
}

interface DueRow {
  resource_id: string;
  tenant_id: string;
  project_id: string;
  kind: string;
  expression: string;
  tick: number;
  offset_ms: number;
  data: string | null;
}

export interface Job {
  id: string;
  tenantId: string;
  projectId: string;
  kind: string;
  tick: string;
  /** Where the claim moved the schedule row from and to, so a tick dropped at shutdown can be handed back. */
  claimed: { tick: number; offset: number; movedTo: number };
}

type Starter = (
  rt: Runtime,
  o: { tenantId: string; projectId: string; trigger: 'schedule'; id: string },
) => Promise<{ run: { id: string } }>;

/** How a due tick of each scheduled kind starts its run. */
const STARTERS: Record<string, Starter> = {
  connector: (rt, o) => startConnectorSync(rt, { ...o, connectorId: o.id }),
  pipeline: (rt, o) => startPipelineRun(rt, { ...o, pipelineId: o.id }),
};

/** The bounded queue of claimed ticks, with per-tenant and global limits on starts in progress. */
export class RunQueue {
  private readonly pending: Job[] = [];
  private running = 0;
  private readonly perTenant = new Map<string, { queued: number; running: number }>();
  private idleWaiters: (() => void)[] = [];
  /** A pump is due at the next turn of the event loop (pumpSoon). */
  private pumpQueued = false;
  cleared = false;

  constructor(private readonly fire: (job: Job) => Promise<void>) {}

  get size(): number {
    return this.pending.length + this.running;
  }

  private counts(tenantId: string) {
    let c = this.perTenant.get(tenantId);
    if (!c) this.perTenant.set(tenantId, (c = { queued: 0, running: 0 }));
    return c;
  }

  accepts(tenantId: string): boolean {
    return this.room(tenantId) > 0;
  }

  /** How many more ticks of the tenant may queue now. */
  room(tenantId: string): number {
    const c = this.perTenant.get(tenantId);
    return Math.min(MAX_QUEUED - this.size, MAX_QUEUED_PER_TENANT - (c ? c.queued + c.running : 0));
  }

  /** Whether a tenant may not queue more now (a look then goes tenant by tenant). */
  anySaturated(): boolean {
    for (const c of this.perTenant.values()) if (c.queued + c.running >= MAX_QUEUED_PER_TENANT) return true;
    return false;
  }

  push(job: Job): void {
    this.pending.push(job);
    this.counts(job.tenantId).queued++;
    this.pumpSoon();
  }

  /**
   * Starts the next job that may start, and the one after at the next turn of the event loop. A
   * run's start is a chain of queries that on SQLite never leaves the microtask queue (slices.ts):
   * ten started together held every other request for 20-35 ms; one a turn holds them 2-3 ms.
   */
  private pump(): void {
    this.pumpQueued = false;
    for (let i = 0; i < this.pending.length && this.running < MAX_STARTING; i++) {
      const job = this.pending[i];
      const c = this.counts(job.tenantId);
      if (c.running >= MAX_STARTING_PER_TENANT) continue;
      this.pending.splice(i, 1);
      c.queued--;
      c.running++;
      this.running++;
      void this.fire(job).finally(() => {
        c.running--;
        this.running--;
        if (c.queued + c.running === 0) this.perTenant.delete(job.tenantId);
        this.pumpSoon();
      });
      if (this.pending.length) this.pumpSoon();
      break;
    }
    if (this.size === 0) for (const w of this.idleWaiters.splice(0)) w();
  }

  private pumpSoon(): void {
    if (this.pumpQueued) return;
    this.pumpQueued = true;
    setImmediate(() => this.pump());
  }

  /** Drops what waits (returned), resolves when what started is done. */
  async clear(): Promise<Job[]> {
    this.cleared = true;
    const dropped = this.pending.splice(0);
    for (const job of dropped) this.counts(job.tenantId).queued--;
    if (this.size > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    return dropped;
  }

  /** Resolves when nothing waits or starts (tests). */
  idle(): Promise<void> {
    if (this.size === 0) return Promise.resolve();
    return new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }
}

/**
 * A page of freshness rules after a `seq` (of every tenant), through their partial index (migration
 * 11). SQLite is told the index: its planner, which cannot tell how few rows the partial index holds,
 * preferred the equality on `kind` of resources_kind, every alert rule of every tenant.
 */
export const freshnessRulesPageSql = (dialect: 'sqlite' | 'postgres') =>
  `SELECT seq, tenant_id, project_id, data FROM resources${dialect === 'sqlite' ? ' INDEXED BY resources_freshness_rules' : ''} WHERE ${freshnessRuleCondition(dialect)} AND seq > ? ORDER BY seq LIMIT ${RULE_PAGE}`;

const DUE_ROWS_SQL =
  'SELECT s.resource_id, s.tenant_id, s.project_id, s.kind, s.expression, s.tick, s.offset_ms, r.data FROM schedules s LEFT JOIN resources r ON r.id = s.resource_id WHERE s.next_due_at <= ?';

/** One tenant's due rows, earliest first, through schedules_tenant_due (migration 17; SQLite is told). */
const tenantDueRowsSql = (dialect: 'sqlite' | 'postgres') =>
  `${DUE_ROWS_SQL.replace('FROM schedules s', `FROM schedules s${dialect === 'sqlite' ? ' INDEXED BY schedules_tenant_due' : ''}`)} AND s.tenant_id = ? ORDER BY s.next_due_at LIMIT ?`;

/** A page of tenants with the earliest due time of each (null: nothing scheduled), one index look each. */
const TENANTS_DUE_SQL = `SELECT t.id, (SELECT MIN(s.next_due_at) FROM schedules s WHERE s.tenant_id = t.id) AS due FROM tenants t WHERE t.id > ? ORDER BY t.id LIMIT ${TENANT_PAGE}`;

export class Scheduler {
  readonly alerting: Alerting;
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private backfill?: Promise<void>;
  private startedAt = 0;
  private stopped = false;
  /** The service-clock minute freshness rules were last looked at. */
  private freshnessMinute = -1;
  readonly queue = new RunQueue((job) => this.fireTick(job));

  constructor(readonly rt: Runtime) {
    this.alerting = new Alerting(rt);
  }

  get intervalMs(): number {
    return Math.max(MIN_INTERVAL_MS, SCHEDULER_INTERVAL_MS / this.rt.ctx.options.timeScale);
  }

  start(): void {
    this.startedAt = this.rt.nowMs();
    this.rt.events.on('run_update', this.alerting.onRunUpdate);
    this.backfill = Promise.all([
      this.backfillSchedules().catch((err) => this.rt.log?.error({ err }, 'schedule backfill failed')),
      this.backfillAlerts().catch((err) => this.rt.log?.error({ err }, 'alert backfill failed')),
    ]).then(() => undefined);
    this.timer = setInterval(() => void this.tick(), this.intervalMs);
    this.timer.unref();
  }

  /** One look (skipped while the previous one still runs). Resolves when it is done. */
  tick(): Promise<void> {
    if (this.running || this.stopped) return this.running ?? Promise.resolve();
    this.running = this.look()
      .catch((err) => this.rt.log?.error({ err }, 'scheduler tick failed'))
      .finally(() => (this.running = undefined));
    return this.running;
  }

  private async look(): Promise<void> {
    await this.runSchedules(this.rt.nowMs());
    if (this.stopped) return;
    await this.checkFreshness();
    if (this.stopped) return;
    await escalate(this.rt, this.alerting.queue, () => this.stopped);
    if (this.stopped) return;
    // Rows queued by other replicas, claims that lapsed: sent from every look.
    await this.alerting.queue.dispatch();
  }

  /**
   * Claims and queues the due ticks, in batches, never reading a row that is not due. Once a tenant
   * may not queue more (saturated), the look goes on tenant by tenant (dueByTenant): excluding it
   * from this query instead read past all of its due rows on every look while it stayed so: 25 ms
   * on SQLite (18 ms on PostgreSQL) with 50,000 of them.
   */
  private async runSchedules(now: number): Promise<void> {
    const slice = slicer();
    for (;;) {
      if (this.halted || this.queue.size >= MAX_QUEUED) return;
      if (this.queue.anySaturated() || this.rt.runSlots.anyFull()) return this.dueByTenant(now, slice);
      const rows = await this.rt.ctx.db.all<DueRow>(`${DUE_ROWS_SQL} ORDER BY s.next_due_at LIMIT ?`, [now, SCHEDULE_BATCH]);
      for (const row of rows) {
        if (this.halted) return;
        if (!this.mayQueue(row.tenant_id)) continue; // stays due for a later look
        await this.claimDue(row, now);
        await slice();
      }
      if (rows.length < SCHEDULE_BATCH) return;
      await yieldToLoop();
    }
  }

  /** This scheduler or its runtime is stopping: a look ends where it is. */
  private get halted(): boolean {
    return this.stopped || this.rt.stopped;
  }

  private mayQueue(tenantId: string): boolean {
    return this.queue.accepts(tenantId) && !this.rt.runSlots.isFull(tenantId);
  }

  /**
   * The due ticks of the tenants that may queue, the tenant waiting longest first, each read through
   * its own (tenant_id, next_due_at) index range: the work grows with the number of tenants (a
   * page of 500 reads in 0.7 ms on SQLite) and never with a saturated tenant's due rows.
   */
  private async dueByTenant(now: number, slice: ReturnType<typeof slicer>): Promise<void> {
    const { db } = this.rt.ctx;
    const tenants: { id: string; due: number }[] = [];
    for (let after = ''; ; await yieldToLoop()) {
      const page = await db.all<{ id: string; due: number | string | null }>(TENANTS_DUE_SQL, [after]);
      for (const t of page)
        if (t.due !== null && Number(t.due) <= now && this.mayQueue(t.id)) tenants.push({ id: t.id, due: Number(t.due) });
      if (page.length < TENANT_PAGE) break;
      after = page[page.length - 1].id;
    }
    tenants.sort((a, b) => a.due - b.due);
    const dueRowsSql = tenantDueRowsSql(db.dialect);
    for (const { id } of tenants) {
      for (;;) {
        if (this.halted || !this.mayQueue(id)) break;
        const limit = Math.min(SCHEDULE_BATCH, this.queue.room(id));
        const rows = await db.all<DueRow>(dueRowsSql, [now, id, limit]);
        for (const row of rows) {
          if (this.halted) return;
          if (!this.mayQueue(id)) break;
          await this.claimDue(row, now);
          await slice();
        }
        if (rows.length < limit) break;
      }
    }
  }

  /** Moves a due row to its next tick (the claim across replicas) and queues the latest due tick. */
  private async claimDue(row: DueRow, now: number): Promise<void> {
    const { db } = this.rt.ctx;
    if (row.data === null) return void (await db.run('DELETE FROM schedules WHERE resource_id = ?', [row.resource_id])); // its resource is gone
    const tick = Number(row.tick);
    const offset = Number(row.offset_ms);
    let latest: number;
    let next: number;
    try {
      next = nextTickAfter(row.expression, tick);
      latest = tick;
      if (next + offset <= now) {
        // The clock moved past several ticks: only the latest due one runs.
        latest = latestTickAt(row.expression, now - offset);
        next = nextTickAfter(row.expression, latest);
      }
    } catch {
      await db.run('DELETE FROM schedules WHERE resource_id = ?', [row.resource_id]); // validated on write; an old invalid one is not scheduled
      return;
    }
    const claim = await db.run('UPDATE schedules SET tick = ?, next_due_at = ? WHERE resource_id = ? AND tick = ?', [
      next,
      next + offset,
      row.resource_id,
      tick,
    ]);
    if (claim.changes !== 1) return; // another replica moved it, or the schedule was just changed
    if (latest + offset <= this.startedAt) return; // due while the service was down: not back-filled
    const data = JSON.parse(row.data) as Record<string, unknown>;
    if (data.enabled === false || data.status === 'paused') return;
    const created = Date.parse(String(data.created_at ?? ''));
    if (Number.isFinite(created) && latest < created) return;
    this.queue.push({
      id: row.resource_id,
      tenantId: row.tenant_id,
      projectId: row.project_id,
      kind: row.kind,
      tick: new Date(latest).toISOString(),
      claimed: { tick: latest, offset, movedTo: next },
    });
  }

  private async fireTick(job: Job): Promise<void> {
    const { rt } = this;
    // A tenant at its cap of executing runs (run-slots.ts): the tick goes back to due, for a later look.
    if (this.stopped || rt.stopped || rt.runSlots.isFull(job.tenantId)) return this.handBack([job]);
    const claim = await rt.ctx.db.run(
      'INSERT INTO schedule_ticks (resource_id, tick, tenant_id, project_id, kind, instance_id, outcome, run_id, detail, claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (resource_id, tick) DO NOTHING',
      [job.id, job.tick, job.tenantId, job.projectId, job.kind, rt.instanceId, 'claimed', null, null, rt.now()],
    );
    if (claim.changes !== 1) return; // another replica has this tick
    let outcome: 'started' | 'skipped' | 'failed';
    let runId: string | null = null;
    let detail: string | null = null;
    try {
      const starter = STARTERS[job.kind];
      if (!starter) throw new Error(`no scheduled run for kind ${job.kind}`);
      const started = await starter(rt, { tenantId: job.tenantId, projectId: job.projectId, trigger: 'schedule', id: job.id });
      outcome = 'started';
      runId = started.run.id;
    } catch (err) {
      if (!(err instanceof ApiError)) rt.log?.error({ err, resourceId: job.id, tick: job.tick }, 'scheduled run could not start');
      outcome = err instanceof ApiError ? 'skipped' : 'failed';
      detail = (err as Error).message;
    }
    await rt.ctx.db
      .run('UPDATE schedule_ticks SET outcome = ?, run_id = ?, detail = ? WHERE resource_id = ? AND tick = ?', [
        outcome,
        runId,
        detail,
        job.id,
        job.tick,
      ])
      .catch((err) => rt.log?.error({ err, resourceId: job.id }, 'schedule tick outcome not recorded'));
  }

  /** Rows for resources written before the `schedules` table existed (migration 6). A row the store wrote meanwhile wins. */
  private backfillSchedules(): Promise<void> {
    const { db } = this.rt.ctx;
    return backfillOnce(
      db,
      'schedules_backfilled',
      [...SCHEDULED_KINDS.keys()],
      async (r) => {
        const expression = scheduleOf(r.kind, JSON.parse(r.data) as Record<string, unknown>);
        if (expression)
          await putSchedule(
            db,
            { id: r.id, tenantId: r.tenant_id, projectId: r.project_id, kind: r.kind },
            expression,
            this.rt.nowMs(),
            this.rt.ctx.options.timeScale,
            true,
          );
      },
      () => this.halted,
    );
  }

  /** open_alerts and escalations_due rows for alerts fired before migration 7. */
  private backfillAlerts(): Promise<void> {
    const { db } = this.rt.ctx;
    return backfillOnce(
      db,
      'alerts_backfilled',
      ['alert'],
      async (r) => {
        const alert = JSON.parse(r.data) as Record<string, unknown>;
        if (alert.status !== 'firing' && alert.status !== 'acknowledged') return;
        await db.run(
          'INSERT INTO open_alerts (rule_id, resource_key, alert_id, tenant_id) VALUES (?, ?, ?, ?) ON CONFLICT (rule_id, resource_key) DO NOTHING',
          [r.parent_id, String(alert.resource_id ?? ''), r.id, r.tenant_id],
        );
        // A row for every firing alert: the first look drops those whose rule has no policy.
        if (alert.status === 'firing')
          await db.run(
            'INSERT INTO escalations_due (alert_id, tenant_id, project_id, next_due_at) VALUES (?, ?, ?, ?) ON CONFLICT (alert_id) DO NOTHING',
            [r.id, r.tenant_id, r.project_id, this.rt.nowMs()],
          );
      },
      () => this.halted,
    );
  }

  /**
   * Freshness rules, at most once per minute of the service clock (they count whole minutes): the
   * enabled freshness_minutes rules are paged by seq through their own partial index (migration 11;
   * the resources_kind index walked every alert rule of every tenant to find them), and each
   * rule's look is linear in its project's connectors (alerts.ts).
   */
  private async checkFreshness(): Promise<void> {
    const minute = Math.floor(this.rt.nowMs() / 60_000);
    if (minute === this.freshnessMinute) return;
    this.freshnessMinute = minute;
    for (let after = 0; ;) {
      const rows = await this.rt.ctx.db.all<{ seq: number; tenant_id: string; project_id: string; data: string }>(
        freshnessRulesPageSql(this.rt.ctx.db.dialect),
        [after],
      );
      // The page's rules by project: a project's rules share one pass over its connectors.
      const byProject = new Map<string, { tenantId: string; projectId: string; rules: RuleData[] }>();
      for (const row of rows) {
        const rule = JSON.parse(row.data) as RuleData;
        if (rule.enabled === false || rule.condition?.metric !== 'freshness_minutes') continue;
        const key = `${row.tenant_id}\0${row.project_id}`;
        if (!byProject.has(key)) byProject.set(key, { tenantId: row.tenant_id, projectId: row.project_id, rules: [] });
        byProject.get(key)!.rules.push(rule);
      }
      for (const { tenantId, projectId, rules } of byProject.values()) {
        if (this.stopped) return;
        await yieldToLoop();
        await this.alerting.checkFreshness(tenantId, projectId, rules, () => this.stopped);
      }
      if (rows.length < RULE_PAGE) return;
      after = Number(rows[rows.length - 1].seq);
    }
  }
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.rt.events.off('run_update', this.alerting.onRunUpdate);
    await this.running;
    await this.backfill;
    await this.handBack(await this.queue.clear());
    this.alerting.queue.stop();
    await this.alerting.idle();
  }

  /**
   * Ticks claimed but not started when this instance stops go back to due (unless the schedule
   * changed meanwhile), so another replica runs them; a single instance that restarts does not (ticks
   * due while it was down are not back-filled).
   */
  private async handBack(jobs: Job[]): Promise<void> {
    for (const job of jobs) {
      const { tick, offset, movedTo } = job.claimed;
      await this.rt.ctx.db
        .run('UPDATE schedules SET tick = ?, next_due_at = ? WHERE resource_id = ? AND tick = ?', [tick, tick + offset, job.id, movedTo])
        .catch((err) => this.rt.log?.error({ err, resourceId: job.id }, 'a claimed schedule tick could not be handed back'));
    }
  }
}

/** The scheduler of a runtime (one per service), started when the service is ready and stopped first on close. */
const schedulers = runtimeWorker((rt) => new Scheduler(rt));
export const schedulerOf = schedulers.of;
export const installScheduler = schedulers.install;
