import type { StoredResource } from '../store/resources.js';
import { newId } from '../ids.js';
import type { Runtime } from './runtime.js';
import { inProject, type RunData } from './runs.js';
import { notifyChannels } from './notifications.js';

/**
 * Alert rules (schemas/kinds/alert_rule.schema.json), evaluated when a run ends (run_failed,
 * run_duration_seconds, rows_synced) and by the scheduler loop (freshness_minutes). run_failed
 * is the number of failed runs of the resource in the last `window_minutes` (default 60), so
 * `gte 3` fires on the third failure within the window and `gt 0` on every first one. A match
 * fires an alert (kind `alert`, parent the rule): status firing, the rule's severity, a
 * message and the resource it is about. While an alert of the same rule and resource is firing
 * or acknowledged, no second one fires. A fired alert is emitted as `alert_update`
 * (tenantId, alert) on the runtime's events and sent to the rule's channels.
 */
export interface RuleData {
  id: string;
  name: string;
  severity: 'info' | 'warning' | 'critical';
  condition: { metric: 'run_failed' | 'run_duration_seconds' | 'rows_synced' | 'freshness_minutes'; operator: 'gt' | 'gte' | 'lt' | 'lte' | 'eq'; threshold: number; window_minutes?: number };
  target?: { connector_id?: string; pipeline_id?: string; dbt_project_id?: string };
  channel_ids?: string[];
  escalation_policy_id?: string;
  enabled?: boolean;
}

export const compare = (value: number, operator: RuleData['condition']['operator'], threshold: number): boolean =>
  operator === 'gt' ? value > threshold : operator === 'gte' ? value >= threshold : operator === 'lt' ? value < threshold : operator === 'lte' ? value <= threshold : value === threshold;

const OPS = { gt: '>', gte: '>=', lt: '<', lte: '<=', eq: '=' } as const;

/** The resources a rule watches; empty: every one of the project. */
export const targetsOf = (rule: RuleData): string[] => Object.values(rule.target ?? {}).filter((v): v is string => typeof v === 'string' && !!v);

const KIND_OF_RUN: Record<string, string> = { connector_sync: 'connector', pipeline: 'pipeline', dbt_run: 'dbt_project' };
const LABEL: Record<string, string> = { connector: 'Connector', pipeline: 'Pipeline', dbt_project: 'dbt project' };

export async function enabledRules(rt: Runtime, tenantId: string, projectId: string): Promise<RuleData[]> {
  const rows = await rt.ctx.resources.list({ tenantId, projectId, kind: 'alert_rule', limit: 10_000 });
  return rows.map((r) => r.data as unknown as RuleData).filter((r) => r.enabled !== false);
}

export const DEFAULT_WINDOW_MINUTES = 60;

/**
 * What a finished run says against one rule: the alert message, or null when it does not match.
 * `failuresInWindow` counts the failed runs of the run's resource in the rule's window (this one included).
 */
export async function matchRun(rule: RuleData, run: RunData, what: string, failuresInWindow: (windowMinutes: number) => Promise<number>): Promise<string | null> {
  const targets = targetsOf(rule);
  if (targets.length && !targets.includes(run.resource_id)) return null;
  const { metric, operator, threshold } = rule.condition;
  if (metric === 'run_failed') {
    if (run.status !== 'failed') return null;
    const window = rule.condition.window_minutes ?? DEFAULT_WINDOW_MINUTES;
    const failures = await failuresInWindow(window);
    if (!compare(failures, operator, threshold)) return null;
    const count = failures === 1 ? '' : ` (${failures} failed runs in ${window} minutes, ${OPS[operator]} ${threshold})`;
    return `${what}: run ${run.id} failed: ${run.error ?? 'unknown error'}${count}`;
  }
  if (metric === 'run_duration_seconds') {
    const d = run.duration_seconds ?? 0;
    return compare(d, operator, threshold) ? `${what}: run ${run.id} took ${d} s (${OPS[operator]} ${threshold} s)` : null;
  }
  if (metric === 'rows_synced') {
    if (run.run_type !== 'connector_sync') return null;
    const rows = run.tables.reduce((sum, t) => sum + (t.rows ?? 0), 0);
    return compare(rows, operator, threshold) ? `${what}: sync ${run.id} synced ${rows} rows (${OPS[operator]} ${threshold})` : null;
  }
  return null;
}

export class Alerting {
  private readonly pending = new Set<Promise<unknown>>();

  constructor(readonly rt: Runtime) {}

  /** Keeps background work (evaluation, deliveries) so stop() can wait for it. */
  track<T>(p: Promise<T>): Promise<T> {
    const tracked = p.catch((err) => {
      this.rt.log?.error({ err }, 'alerting failed');
      return undefined;
    });
    this.pending.add(tracked);
    void tracked.finally(() => this.pending.delete(tracked));
    return p;
  }

  async idle(): Promise<void> {
    while (this.pending.size) await Promise.allSettled([...this.pending]);
  }

  readonly onRunUpdate = (tenantId: string, run: RunData) => {
    if (run.status === 'running' || run.status === 'queued' || !run.finished_at) return;
    void this.track(this.evaluateRun(tenantId, run));
  };

  async evaluateRun(tenantId: string, run: RunData): Promise<void> {
    const rules = (await enabledRules(this.rt, tenantId, run.project_id)).filter((r) => r.condition.metric !== 'freshness_minutes');
    if (!rules.length) return;
    const kind = KIND_OF_RUN[run.run_type];
    const resource = kind ? await this.rt.ctx.resources.get(tenantId, run.project_id, kind, run.resource_id) : undefined;
    const what = kind ? `${LABEL[kind]} "${resource?.name ?? run.resource_id}"` : `Infrastructure apply`;
    const failures = new Map<number, Promise<number>>();
    const failuresInWindow = (minutes: number) => {
      let count = failures.get(minutes);
      if (!count) failures.set(minutes, (count = this.failedRuns(tenantId, run, minutes)));
      return count;
    };
    for (const rule of rules) {
      const message = await matchRun(rule, run, what, failuresInWindow);
      if (message) await this.fire(tenantId, run.project_id, rule, run.resource_id, message);
    }
  }

  /** Failed runs of the run's resource that ended in the last `minutes` (the run itself included). */
  private async failedRuns(tenantId: string, run: RunData, minutes: number): Promise<number> {
    const since = this.rt.nowMs() - minutes * 60_000;
    const failed = await this.rt.ctx.resources.list({ tenantId, projectId: run.project_id, kind: 'run', parentId: run.resource_id, where: { status: 'failed' }, limit: 10_000 });
    const ids = new Set(failed.filter((r) => Date.parse(String(r.data.finished_at ?? '')) >= since).map((r) => r.id));
    ids.add(run.id);
    return ids.size;
  }

  /** Freshness rules (scheduler loop): a connector whose last sync (or creation, never synced) is older than the threshold. */
  async checkFreshness(tenantId: string, projectId: string, rule: RuleData): Promise<void> {
    const targets = targetsOf(rule);
    const connectors = targets.length
      ? (await Promise.all(targets.map((id) => this.rt.ctx.resources.get(tenantId, projectId, 'connector', id)))).filter((c): c is StoredResource => !!c)
      : await this.rt.ctx.resources.list({ tenantId, projectId, kind: 'connector', limit: 10_000 });
    const now = this.rt.nowMs();
    for (const c of connectors) {
      if (c.data.status === 'syncing') continue;
      const since = Date.parse(String(c.data.last_sync_at ?? c.data.created_at ?? ''));
      if (!Number.isFinite(since)) continue;
      const minutes = Math.floor((now - since) / 60_000);
      const { operator, threshold } = rule.condition;
      if (!compare(minutes, operator, threshold)) continue;
      const when = c.data.last_sync_at ? `last synced ${minutes} minutes ago` : `never synced (created ${minutes} minutes ago)`;
      await this.fire(tenantId, projectId, rule, c.id, `Connector "${c.name}" ${when} (${OPS[operator]} ${threshold} minutes)`);
    }
  }

  /** Fires an alert unless one of the same rule and resource is firing or acknowledged. Returns it when fired. */
  async fire(tenantId: string, projectId: string, rule: RuleData, resourceId: string | null, message: string): Promise<Record<string, unknown> | undefined> {
    const rt = this.rt;
    let alert: Record<string, unknown> | undefined;
    try {
      alert = await inProject(rt, tenantId, projectId, async (q) => {
        // The project lock serialises this check-then-insert across replicas.
        if (!(await rt.ctx.resources.exists(tenantId, projectId, 'alert_rule', rule.id, q))) return undefined;
        for (const status of ['firing', 'acknowledged']) {
          const open = await rt.ctx.resources.list({ tenantId, projectId, kind: 'alert', parentId: rule.id, where: { status }, limit: 10_000 }, q);
          if (open.some((a) => (a.data.resource_id ?? null) === resourceId)) return undefined;
        }
        const id = newId('alert');
        const now = rt.now();
        const data: Record<string, unknown> = {
          id,
          project_id: projectId,
          alert_rule_id: rule.id,
          severity: rule.severity,
          status: 'firing',
          message,
          resource_id: resourceId,
          fired_at: now,
          acknowledged_at: null,
          acknowledged_by: null,
          resolved_at: null,
          resolved_by: null,
        };
        await rt.ctx.resources.insert({ id, tenantId, projectId, kind: 'alert', parentId: rule.id, name: id, data, secrets: null }, q);
        return data;
      });
    } catch (err) {
      if ((err as { code?: string }).code === 'resource_not_found') return undefined; // the project went away
      throw err;
    }
    if (!alert) return undefined;
    rt.events.emit('alert_update', tenantId, alert);
    if (rule.channel_ids?.length) void this.track(notifyChannels(rt, tenantId, projectId, rule.channel_ids, { type: 'alert_fired', alert, project_id: projectId, timestamp: rt.now() }));
    return alert;
  }
}
