import { insertRows, insertRowsReturning, padToBucket, paramList, type Queryable } from '../store/db.js';
import { kind } from '../../kinds/index.js';
import { newId } from '../ids.js';
import { ordered } from '../writes.js';
import type { Runtime } from './runtime.js';
import { inProject, type RunData } from './runs.js';
import { NotificationQueue } from './notification-queue.js';
import { slicer, yieldToLoop } from './slices.js';
import { ruleCacheOf } from './rule-cache.js';
import { firstStepAt, type PolicyData } from './escalation.js';

const ALERT = kind('alert');
/** A new alert's fields that are null until it is acknowledged or resolved: the schema's nullable ones. */
const ALERT_NULLS = Object.fromEntries(
  Object.entries(ALERT.schema.properties ?? {}).flatMap(([name, prop]) =>
    Array.isArray(prop.type) && prop.type.includes('null') ? [[name, null]] : [],
  ),
);

/**
 * Alert rules (schemas/kinds/alert_rule.schema.json), evaluated when a run ends (run_failed,
 * run_duration_seconds, rows_synced) and by the scheduler loop (freshness_minutes). run_failed
 * is the number of failed runs of the resource in the last `window_minutes` (default 60), so
 * `gte 3` fires on the third failure within the window and `gt 0` on every first one. A match
 * fires an alert (kind `alert`, parent the rule): status firing, the rule's severity, a
 * message and the resource it is about. While an alert of the same rule and resource is firing
 * or acknowledged, no second one fires. A fired alert is emitted as `alert_update`
 * (tenantId, alert) on the runtime's events and queued for the rule's channels in the transaction
 * that fires it (notification-queue.ts).
 */
export interface RuleData {
  id: string;
  name: string;
  severity: 'info' | 'warning' | 'critical';
  condition: {
    metric: 'run_failed' | 'run_duration_seconds' | 'rows_synced' | 'freshness_minutes';
    operator: 'gt' | 'gte' | 'lt' | 'lte' | 'eq';
    threshold: number;
    window_minutes?: number;
  };
  target?: { connector_id?: string; pipeline_id?: string; dbt_project_id?: string };
  channel_ids?: string[];
  escalation_policy_id?: string;
  enabled?: boolean;
}

export const compare = (value: number, operator: RuleData['condition']['operator'], threshold: number): boolean =>
  operator === 'gt'
    ? value > threshold
    : operator === 'gte'
      ? value >= threshold
      : operator === 'lt'
        ? value < threshold
        : operator === 'lte'
          ? value <= threshold
          : value === threshold;

const OPS = { gt: '>', gte: '>=', lt: '<', lte: '<=', eq: '=' } as const;

/** The resources a rule watches; empty: every one of the project. */
export const targetsOf = (rule: RuleData): string[] =>
  Object.values(rule.target ?? {}).filter((v): v is string => typeof v === 'string' && !!v);

const KIND_OF_RUN: Record<string, string> = { connector_sync: 'connector', pipeline: 'pipeline', dbt_run: 'dbt_project' };
const LABEL: Record<string, string> = { connector: 'Connector', pipeline: 'Pipeline', dbt_project: 'dbt project' };

/**
 * The project's enabled rules, every one of them: at most 5,000 (x-max-per-scope), read in pages as
 * stored JSON with a turn of the event loop between pages (a single 10,000-row read dropped the rest).
 */
export async function enabledRules(rt: Runtime, tenantId: string, projectId: string): Promise<RuleData[]> {
  const rules: RuleData[] = [];
  for (let afterSeq = 0; ; await yieldToLoop()) {
    const page = await rt.ctx.resources.listJson({ tenantId, projectId, kind: 'alert_rule', afterSeq, limit: RULE_PAGE });
    for (const row of page) {
      const rule = JSON.parse(row.data) as RuleData;
      if (rule.enabled !== false) rules.push(rule);
    }
    if (page.length < RULE_PAGE) return rules;
    afterSeq = page[page.length - 1].seq;
  }
}

const RULE_PAGE = 1_000;

export const DEFAULT_WINDOW_MINUTES = 60;

/**
 * Bookkeeping of an alert's transition, in its transaction: an acknowledged alert escalates no more,
 * and a resolved one frees its (rule, resource) for the next alert.
 */
export async function afterAlertTransition(q: Queryable, alert: Record<string, unknown>, to: 'acknowledged' | 'resolved'): Promise<void> {
  await q.run('DELETE FROM escalations_due WHERE alert_id = ?', [String(alert.id)]);
  if (to === 'resolved')
    await q.run('DELETE FROM open_alerts WHERE rule_id = ? AND resource_key = ? AND alert_id = ?', [
      String(alert.alert_rule_id),
      String(alert.resource_id ?? ''),
      String(alert.id),
    ]);
}

/** Connectors read per query by a freshness look. */
const FRESHNESS_PAGE = 500;

/**
 * What a finished run says against one rule: the alert message, or null when it does not match.
 * `failuresInWindow` counts the failed runs of the run's resource in the rule's window (this one included).
 */
export async function matchRun(
  rule: RuleData,
  run: RunData,
  what: string,
  failuresInWindow: (windowMinutes: number) => Promise<number>,
): Promise<string | null> {
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

/** An alert to fire: its rule, the resource it is about (null: none) and its message. */
export interface Firing {
  rule: RuleData;
  resourceId: string | null;
  message: string;
}

/** Alerts fired per transaction (fireAll). */
const FIRE_BATCH = 100;

/** Runs read per statement by the walk of failedRuns. */
const FAILED_RUNS_PAGE = 20;

export class Alerting {
  private readonly pending = new Set<Promise<unknown>>();
  /** The alerts' and escalations' notifications, sent from a table. */
  readonly queue: NotificationQueue;

  constructor(readonly rt: Runtime) {
    this.queue = new NotificationQueue(rt, (p) => this.track(p));
  }

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
    const all = await ruleCacheOf(this.rt.ctx.db).rules(tenantId, run.project_id, () => enabledRules(this.rt, tenantId, run.project_id));
    const rules = all.filter((r) => r.condition.metric !== 'freshness_minutes');
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

  /**
   * Failed runs of the run's resource that ended in the last `minutes` (the run itself included).
   * A resource's runs never overlap (a trigger is refused while one runs), so they end in the order
   * they started: walking them newest first, the first one that ended before the window ends the
   * walk. It reads the runs in the window and one more, not the history (up to --run-history runs,
   * a sync's run up to 2 MB of JSON each, which a COUNT with a JSON filter parsed on every failure).
   */
  private async failedRuns(tenantId: string, run: RunData, minutes: number): Promise<number> {
    const since = new Date(this.rt.nowMs() - minutes * 60_000).toISOString();
    const scope = { tenantId, projectId: run.project_id, kind: 'run', parentId: run.resource_id };
    let failed = 1;
    for (let before: number | undefined; ;) {
      const page = await this.rt.ctx.resources.newestChildFields(scope, ['id', 'status', 'finished_at'], FAILED_RUNS_PAGE, before);
      for (const r of page) {
        if (r.id === run.id || r.finished_at === null) continue; // this run; one still running
        if (String(r.finished_at) < since) return failed;
        if (r.status === 'failed') failed++;
      }
      if (page.length < FAILED_RUNS_PAGE) return failed;
      before = Number(page[page.length - 1].seq);
    }
  }

  /**
   * Freshness rules of one project (scheduler loop): a connector whose last sync (or creation,
   * never synced) is older than a rule's threshold. A rule naming its connectors reads those; the
   * rules that watch every connector share one pass over the project's connectors, read in pages by
   * seq as stored JSON (no secrets opened), in slices (slices.ts): a pass per rule parsed every
   * connector once per rule, 100 rules on 100,000 connectors 10 million parses a minute. Connectors
   * with an open alert of a rule are skipped for it, from one read of open_alerts per page (its
   * primary key, for the page's ids only), so a look is linear in the project's connectors.
   */
  async checkFreshness(tenantId: string, projectId: string, rules: RuleData[], stopped: () => boolean = () => false): Promise<void> {
    const now = this.rt.nowMs();
    const openAmong = async (ruleIds: string[], all: string[]) => {
      const ids = padToBucket(all);
      const ruleList = padToBucket(ruleIds);
      if (ids.length === 0 || ruleList.length === 0) return new Set<string>();
      const rows = await this.rt.ctx.db.all<{ rule_id: string; resource_key: string }>(
        `SELECT rule_id, resource_key FROM open_alerts WHERE rule_id IN (${paramList(ruleList.length)}) AND resource_key IN (${paramList(ids.length)})`,
        [...ruleList, ...ids],
      );
      return new Set(rows.map((r) => `${r.rule_id}\0${r.resource_key}`));
    };
    /** The alert a stale connector calls for under `rule`, unless it has one open. */
    const check = (rule: RuleData, c: Record<string, unknown>, alerted: Set<string>): Firing | undefined => {
      if (c.status === 'syncing' || alerted.has(`${rule.id}\0${String(c.id)}`)) return undefined;
      const since = Date.parse(String(c.last_sync_at ?? c.created_at ?? ''));
      if (!Number.isFinite(since)) return undefined;
      const minutes = Math.floor((now - since) / 60_000);
      const { operator, threshold } = rule.condition;
      if (!compare(minutes, operator, threshold)) return undefined;
      const when = c.last_sync_at ? `last synced ${minutes} minutes ago` : `never synced (created ${minutes} minutes ago)`;
      return { rule, resourceId: String(c.id), message: `Connector "${String(c.name)}" ${when} (${OPS[operator]} ${threshold} minutes)` };
    };
    const watchAll: RuleData[] = [];
    for (const rule of rules) {
      const targets = targetsOf(rule);
      if (!targets.length) {
        watchAll.push(rule);
        continue;
      }
      const alerted = await openAmong([rule.id], targets);
      const firings: Firing[] = [];
      for (const id of targets) {
        const c = await this.rt.ctx.resources.get(tenantId, projectId, 'connector', id);
        const firing = c && check(rule, c.data, alerted);
        if (firing) firings.push(firing);
      }
      await this.fireAll(tenantId, projectId, firings);
    }
    if (!watchAll.length) return;
    const slice = slicer();
    for (let afterSeq = 0; !stopped();) {
      const page = await this.rt.ctx.resources.listJson({ tenantId, projectId, kind: 'connector', afterSeq, limit: FRESHNESS_PAGE });
      const connectors = page.map((row) => JSON.parse(row.data) as Record<string, unknown>);
      const alerted = await openAmong(
        watchAll.map((r) => r.id),
        connectors.map((c) => String(c.id)),
      );
      const firings: Firing[] = [];
      for (const c of connectors) {
        for (const rule of watchAll) {
          const firing = check(rule, c, alerted);
          if (firing) firings.push(firing);
        }
        await slice();
      }
      await this.fireAll(tenantId, projectId, firings);
      if (page.length < FRESHNESS_PAGE) return;
      afterSeq = page[page.length - 1].seq;
    }
  }

  /**
   * Fires an alert unless one of the same rule and resource is firing or acknowledged. Returns it when fired.
   */
  async fire(
    tenantId: string,
    projectId: string,
    rule: RuleData,
    resourceId: string | null,
    message: string,
  ): Promise<Record<string, unknown> | undefined> {
    return (await this.fireAll(tenantId, projectId, [{ rule, resourceId, message }]))[0];
  }

  /**
   * Fires the alerts of `firings` that have no open alert of the same rule and resource yet, FIRE_BATCH
   * per transaction; returns those fired. Each (rule, resource) is claimed in open_alerts first (one
   * indexed row, across replicas), so the check costs the same with 10 open alerts or 100,000. A
   * transaction per alert cost 7 statements each; on PostgreSQL, where every statement is a round trip
   * to a backend on the same cores, a look that fired 3,000 took 9 times SQLite's time.
   */
  async fireAll(tenantId: string, projectId: string, firings: readonly Firing[]): Promise<Record<string, unknown>[]> {
    const fired: Record<string, unknown>[] = [];
    for (let start = 0; start < firings.length; start += FIRE_BATCH) {
      if (start > 0) await yieldToLoop(); // on SQLite a batch never reaches the event loop (slices.ts)
      let batch: { alert: Record<string, unknown>; rule: RuleData }[];
      try {
        batch = await inProject(this.rt, tenantId, projectId, (q) =>
          this.insertAlerts(q, tenantId, projectId, firings.slice(start, start + FIRE_BATCH)),
        );
      } catch (err) {
        if ((err as { code?: string }).code === 'resource_not_found') return fired; // the project went away
        throw err;
      }
      for (const { alert } of batch) this.rt.events.emit('alert_update', tenantId, alert);
      if (batch.some((b) => b.rule.channel_ids?.length)) this.queue.kick();
      fired.push(...batch.map((b) => b.alert));
    }
    return fired;
  }

  /** The alerts of `firings` whose rule still exists and whose (rule, resource) they claim, inserted under the caller's transaction. */
  private async insertAlerts(
    q: Queryable,
    tenantId: string,
    projectId: string,
    firings: readonly Firing[],
  ): Promise<{ alert: Record<string, unknown>; rule: RuleData }[]> {
    const { resources } = this.rt.ctx;
    const ruleExists = new Map<string, boolean>();
    const candidates: (Firing & { id: string })[] = [];
    for (const f of firings) {
      let exists = ruleExists.get(f.rule.id);
      if (exists === undefined)
        ruleExists.set(f.rule.id, (exists = await resources.exists(tenantId, projectId, 'alert_rule', f.rule.id, q)));
      if (exists) candidates.push({ ...f, id: newId('alert') });
    }
    const claimed = await this.claimOpen(q, tenantId, projectId, candidates);
    const now = this.rt.now();
    const made = claimed.map((f) => ({
      rule: f.rule,
      alert: ordered(ALERT, {
        ...ALERT_NULLS,
        id: f.id,
        project_id: projectId,
        alert_rule_id: f.rule.id,
        severity: f.rule.severity,
        status: 'firing',
        message: f.message,
        resource_id: f.resourceId,
        fired_at: now,
      }),
    }));
    await resources.insertMany(
      made.map(({ alert, rule }) => {
        const id = String(alert.id);
        return { id, tenantId, projectId, kind: 'alert', parentId: rule.id, name: id, data: alert, secrets: null };
      }),
      q,
    );
    await this.dueForEscalation(q, tenantId, projectId, made, Date.parse(now));
    // Sent once committed (NotificationQueue): a fired alert goes to the rule's channels.
    await this.queue.enqueue(
      q,
      made.map(({ alert, rule }) => ({
        tenantId,
        projectId,
        channelIds: rule.channel_ids ?? [],
        event: { type: 'alert_fired', alert, project_id: projectId, timestamp: now },
      })),
    );
    return made;
  }

  /**
   * The new alerts whose rule has an escalation policy get their escalations_due row, due at the policy's
   * first step: looked at by the scheduler from then on (escalation.ts), never by a scan of firing alerts.
   */
  private async dueForEscalation(
    q: Queryable,
    tenantId: string,
    projectId: string,
    made: { alert: Record<string, unknown>; rule: RuleData }[],
    firedAtMs: number,
  ): Promise<void> {
    const policies = await this.rt.ctx.resources.getMany(
      tenantId,
      projectId,
      'escalation_policy',
      made.flatMap((m) => m.rule.escalation_policy_id ?? []),
      q,
    );
    const due = made.flatMap(({ alert, rule }) => {
      const policy = policies.get(rule.escalation_policy_id ?? '')?.data as PolicyData | undefined;
      const at = policy && firstStepAt(policy, firedAtMs);
      return at === undefined ? [] : [{ id: String(alert.id), at }];
    });
    await insertRows(
      q,
      due.map((r) => [r.id, tenantId, projectId, r.at]),
      (values) =>
        `INSERT INTO escalations_due (alert_id, tenant_id, project_id, next_due_at) VALUES ${values} ON CONFLICT (alert_id) DO NOTHING`,
    );
  }

  /**
   * Claims (rule, resource) for each candidate alert, in the transaction that inserts them: returns those
   * with no other alert of theirs open. New rows go in one statement; a row left by an alert that was
   * resolved or deleted since is taken over. The project lock of the transaction serialises claims of
   * one rule across replicas, and a claim rolled back with its insert leaves nothing behind.
   */
  private async claimOpen<C extends Firing & { id: string }>(
    q: Queryable,
    tenantId: string,
    projectId: string,
    candidates: C[],
  ): Promise<C[]> {
    if (!candidates.length) return [];
    const inserted = await insertRowsReturning<{ alert_id: string }>(
      q,
      candidates.map((c) => [c.rule.id, c.resourceId ?? '', c.id, tenantId]),
      (values) =>
        `INSERT INTO open_alerts (rule_id, resource_key, alert_id, tenant_id) VALUES ${values} ON CONFLICT (rule_id, resource_key) DO NOTHING RETURNING alert_id`,
    );
    const fresh = new Set(inserted.map((r) => r.alert_id));
    const claimed: C[] = [];
    const seen = new Set<string>(); // a (rule, resource) twice in one batch: the first one only
    for (const c of candidates) {
      const key = `${c.rule.id}\0${c.resourceId ?? ''}`;
      if (seen.has(key)) continue;
      seen.add(key);
      if (fresh.has(c.id) || (await this.takeOver(q, tenantId, projectId, c.rule.id, c.resourceId ?? '', c.id))) claimed.push(c);
    }
    return claimed;
  }

  /** Moves the (rule, resource) row to `alertId` when the alert it names is no longer open. */
  private async takeOver(q: Queryable, tenantId: string, projectId: string, ruleId: string, resourceKey: string, alertId: string) {
    const row = await q.get<{ alert_id: string }>('SELECT alert_id FROM open_alerts WHERE rule_id = ? AND resource_key = ?', [
      ruleId,
      resourceKey,
    ]);
    if (!row) return false;
    const open = await this.rt.ctx.resources.get(tenantId, projectId, 'alert', row.alert_id, q);
    if (open && (open.data.status === 'firing' || open.data.status === 'acknowledged')) return false;
    const taken = await q.run('UPDATE open_alerts SET alert_id = ? WHERE rule_id = ? AND resource_key = ? AND alert_id = ?', [
      alertId,
      ruleId,
      resourceKey,
      row.alert_id,
    ]);
    return taken.changes === 1;
  }
}
