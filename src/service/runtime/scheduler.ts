import type { FastifyInstance } from 'fastify';
import { CronExpressionParser } from 'cron-parser';
import { ApiError } from '../errors.js';
import type { Runtime } from './runtime.js';
import { startConnectorSync } from './connectors.js';
import { startPipelineRun } from './pipelines.js';
import { Alerting, type RuleData } from './alerts.js';
import { escalate } from './escalation.js';

/**
 * The scheduler loop of one service process. Every SCHEDULER_INTERVAL_MS (at time scale 1;
 * divided by the time scale, at least MIN_INTERVAL_MS) it looks at the service clock and:
 *
 * 1. starts the runs whose cron `schedule` had a tick since the previous look (connectors,
 *    and pipelines that are `enabled`), with `trigger: schedule`. Each (resource, tick) is
 *    claimed first with an INSERT into `schedule_ticks` (primary key resource_id + tick,
 *    ON CONFLICT DO NOTHING): of several replicas on one PostgreSQL database only the one whose
 *    insert went in starts the run. The row records the outcome: `started` (run_id) or
 *    `skipped` (detail: e.g. the connector is still syncing, the pipeline is still running).
 *    If the clock moved past several ticks between two looks, only the latest one runs.
 *    Ticks that passed while the service was down are not back-filled: the first look after a
 *    start only considers ticks after the start. A tick before the resource was created is ignored.
 * 2. evaluates the enabled `freshness_minutes` alert rules;
 * 3. escalates firing alerts (escalation.ts).
 *
 * Alert rules on runs are evaluated when a run ends (the runtime's `run_update` event).
 */
export const SCHEDULER_INTERVAL_MS = 5_000;
export const MIN_INTERVAL_MS = 20;

/** The latest tick of a five-field UTC cron expression at or before `atMs`. */
export function latestTick(expression: string, atMs: number): number {
  return CronExpressionParser.parse(expression, { tz: 'UTC', currentDate: new Date(atMs + 1) })
    .prev()
    .getTime();
}

interface ScheduledRow {
  id: string;
  tenant_id: string;
  project_id: string;
  kind: 'connector' | 'pipeline';
  data: string;
}

export class Scheduler {
  readonly alerting: Alerting;
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private lastLook = 0;
  private stopped = false;

  constructor(readonly rt: Runtime) {
    this.alerting = new Alerting(rt);
  }

  get intervalMs(): number {
    return Math.max(MIN_INTERVAL_MS, SCHEDULER_INTERVAL_MS / this.rt.ctx.options.timeScale);
  }

  start(): void {
    this.lastLook = this.rt.nowMs();
    this.rt.events.on('run_update', this.alerting.onRunUpdate);
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
    const now = this.rt.nowMs();
    const since = this.lastLook;
    if (now > since) {
      this.lastLook = now;
      await this.runSchedules(since, now);
    }
    if (this.stopped) return;
    await this.checkFreshness();
    if (this.stopped) return;
    await escalate(this.rt, (p) => this.alerting.track(p));
  }

  private async runSchedules(since: number, now: number): Promise<void> {
    const rows = await this.rt.ctx.db.all<ScheduledRow>(`SELECT id, tenant_id, project_id, kind, data FROM resources WHERE kind IN ('connector', 'pipeline') AND data LIKE '%"schedule"%'`);
    for (const row of rows) {
      if (this.stopped || this.rt.stopped) return;
      const data = JSON.parse(row.data) as Record<string, unknown>;
      if (typeof data.schedule !== 'string' || !data.schedule) continue;
      if (row.kind === 'pipeline' && data.enabled === false) continue;
      if (row.kind === 'connector' && data.status === 'paused') continue;
      let tick: number;
      try {
        tick = latestTick(data.schedule, now);
      } catch {
        continue; // validated on write; an old invalid one is not scheduled
      }
      if (tick <= since) continue;
      const created = Date.parse(String(data.created_at ?? ''));
      if (Number.isFinite(created) && tick < created) continue;
      await this.fireTick(row, new Date(tick).toISOString());
    }
  }

  private async fireTick(row: ScheduledRow, tick: string): Promise<void> {
    const { rt } = this;
    const claim = await rt.ctx.db.run(
      'INSERT INTO schedule_ticks (resource_id, tick, tenant_id, project_id, kind, instance_id, outcome, run_id, detail, claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (resource_id, tick) DO NOTHING',
      [row.id, tick, row.tenant_id, row.project_id, row.kind, rt.instanceId, 'claimed', null, null, rt.now()],
    );
    if (claim.changes !== 1) return; // another replica has this tick
    let outcome: 'started' | 'skipped' | 'failed';
    let runId: string | null = null;
    let detail: string | null = null;
    try {
      const o = { tenantId: row.tenant_id, projectId: row.project_id, trigger: 'schedule' as const };
      const started = row.kind === 'connector' ? await startConnectorSync(rt, { ...o, connectorId: row.id }) : await startPipelineRun(rt, { ...o, pipelineId: row.id });
      outcome = 'started';
      runId = started.run.id;
    } catch (err) {
      if (!(err instanceof ApiError)) rt.log?.error({ err, resourceId: row.id, tick }, 'scheduled run could not start');
      outcome = err instanceof ApiError ? 'skipped' : 'failed';
      detail = (err as Error).message;
    }
    await rt.ctx.db.run('UPDATE schedule_ticks SET outcome = ?, run_id = ?, detail = ? WHERE resource_id = ? AND tick = ?', [outcome, runId, detail, row.id, tick]);
  }

  private async checkFreshness(): Promise<void> {
    const rows = await this.rt.ctx.db.all<{ tenant_id: string; project_id: string; data: string }>(`SELECT tenant_id, project_id, data FROM resources WHERE kind = 'alert_rule' AND data LIKE '%freshness_minutes%'`);
    for (const row of rows) {
      const rule = JSON.parse(row.data) as RuleData;
      if (rule.enabled === false || rule.condition?.metric !== 'freshness_minutes') continue;
      await this.alerting.checkFreshness(row.tenant_id, row.project_id, rule);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.rt.events.off('run_update', this.alerting.onRunUpdate);
    await this.running;
    await this.alerting.idle();
  }
}

const SCHEDULERS = new WeakMap<Runtime, Scheduler>();

/** The scheduler of a runtime (one per service). */
export function schedulerOf(rt: Runtime): Scheduler {
  let s = SCHEDULERS.get(rt);
  if (!s) SCHEDULERS.set(rt, (s = new Scheduler(rt)));
  return s;
}

/** Starts the scheduler when the service is ready (after the runtime) and stops it first on close. */
export function installScheduler(app: FastifyInstance, rt: Runtime): Scheduler {
  const s = schedulerOf(rt);
  app.addHook('onReady', async () => s.start());
  app.addHook('preClose', async () => s.stop());
  return s;
}
