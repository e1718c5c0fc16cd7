import type { Runtime } from './runtime.js';
import type { RuleData } from './alerts.js';
import type { NotificationQueue } from './notification-queue.js';
import { slicer } from './slices.js';
import { insertRowsReturning, padToBucket, paramList, type Queryable } from '../store/db.js';
import { appendTo } from '../../collections.js';

export interface PolicyData {
  steps: { delay_minutes: number; channel_ids: string[] }[];
  repeat?: number;
}

/**
 * Escalation (schemas/kinds/escalation_policy.schema.json), driven by the scheduler loop with
 * the service clock. While an alert of a rule with an escalation_policy_id is still `firing`,
 * step s of round r (r = 0 .. repeat) is due at
 *   fired_at + r * round + steps[s].delay_minutes   (minutes; round = the largest delay, at least 1)
 * and notifies the step's channels once: each (alert, round, step) is claimed in
 * `alert_escalations` (INSERT ... ON CONFLICT DO NOTHING), so of several replicas only one sends.
 *
 * A look never scans the firing alerts: an alert fired under a rule with a policy gets a row in
 * `escalations_due` (alerts.ts), due at the policy's first step, and a look reads only the rows due
 * now, in batches of ESCALATION_BATCH, each batch's alerts, rules and policies a statement per kind
 * and project. Each row is moved to the alert's next step time (UPDATE ... WHERE next_due_at = the
 * time read: one replica moves it), or deleted when no step is left or the alert is no longer
 * firing: acknowledging or resolving it stops the escalation at its next due time. The rule's policy is read when a step is due, so a
 * changed policy applies to alerts already firing; a rule that gains a policy later does not
 * escalate the alerts it fired before.
 */
export function dueSteps(
  policy: PolicyData,
  firedAtMs: number,
  nowMs: number,
): { key: string; channelIds: string[]; round: number; step: number }[] {
  return stepTimes(policy, firedAtMs)
    .filter((s) => s.at <= nowMs)
    .map(({ key, channelIds, round, step }) => ({ key, channelIds, round, step }));
}

/** Every step of every round with its due time, in round and step order. */
function stepTimes(
  policy: PolicyData,
  firedAtMs: number,
): { key: string; channelIds: string[]; round: number; step: number; at: number }[] {
  const steps = policy.steps ?? [];
  if (!steps.length) return [];
  const round = Math.max(1, ...steps.map((s) => s.delay_minutes)) * 60_000;
  const out: { key: string; channelIds: string[]; round: number; step: number; at: number }[] = [];
  for (let r = 0; r <= (policy.repeat ?? 0); r++) {
    steps.forEach((s, i) =>
      out.push({ key: `${r}:${i}`, channelIds: s.channel_ids, round: r, step: i, at: firedAtMs + r * round + s.delay_minutes * 60_000 }),
    );
  }
  return out;
}

/** Where a new alert's escalations_due row starts: its policy's first step, none without a step. */
export function firstStepAt(policy: PolicyData, firedAtMs: number): number | undefined {
  const steps = policy.steps ?? [];
  if (!steps.length) return undefined;
  // The first round's earliest step: later rounds only add to it.
  return firedAtMs + steps.reduce((min, s) => Math.min(min, s.delay_minutes), Infinity) * 60_000;
}

/** Rows of escalations_due read per query, and looked at together. */
const ESCALATION_BATCH = 100;

/**
 * Due steps one transaction claims (and queues as many notifications for) at most, unless one
 * alert alone has more. A policy can have 50 steps repeated 10 more times: after a stop longer
 * than its rounds, a batch of 100 alerts would have 55,000 steps due, claimed and queued in one
 * transaction. Split, it is 55 transactions of 1,000, each committed before the next starts.
 */
const STEPS_PER_TX = 1_000;

interface DueEscalation {
  alert_id: string;
  tenant_id: string;
  project_id: string;
  next_due_at: number;
}

type StepTime = ReturnType<typeof stepTimes>[number];

/**
 * A due row with what it is about: its alert, the rule's policy id, the steps due now while the
 * alert is firing (sent or not yet), and the row's next due time (none: deleted).
 */
interface Looked {
  row: DueEscalation;
  alert?: Record<string, unknown>;
  policyId?: string;
  due: StepTime[];
  next?: number;
}

export async function escalate(rt: Runtime, queue: NotificationQueue, stopped: () => boolean = () => false): Promise<void> {
  const now = rt.nowMs();
  const slice = slicer();
  for (;;) {
    if (stopped()) return;
    const rows = await rt.ctx.db.all<DueEscalation>(
      'SELECT alert_id, tenant_id, project_id, next_due_at FROM escalations_due WHERE next_due_at <= ? ORDER BY next_due_at LIMIT ?',
      [now, ESCALATION_BATCH],
    );
    if (!rows.length) return; // the usual look: nothing due, and no transaction opened for it
    for (const part of byStepCount(await lookUp(rt, rows, now))) {
      if (stopped()) return; // the rows not moved yet are looked at again by the next look
      // A part's rows move, its steps are claimed and their notifications queued in one transaction
      // (one commit, not one per row; a step claimed is a step queued, sent even if this process stops).
      const sent = await rt.ctx.db.tx(async (q) => {
        const sends = await claimSteps(rt, q, await moveRows(q, part));
        await queue.enqueue(q, notifications(sends, rt.now()));
        return sends.length;
      });
      if (sent) queue.kick();
      if (part.length < rows.length) await slice();
    }
    if (rows.length < ESCALATION_BATCH) return;
    await slice();
  }
}

/** The looked-at rows in parts of at most STEPS_PER_TX due steps (an alert with more is a part alone). */
function byStepCount(looked: Looked[]): Looked[][] {
  const parts: Looked[][] = [];
  let part: Looked[] = [];
  let steps = 0;
  for (const l of looked) {
    if (part.length && steps + l.due.length > STEPS_PER_TX) {
      parts.push(part);
      part = [];
      steps = 0;
    }
    part.push(l);
    steps += l.due.length;
  }
  if (part.length) parts.push(part);
  return parts;
}

/** The queued notification of each step claimed. */
function notifications(sends: Awaited<ReturnType<typeof claimSteps>>, timestamp: string) {
  return sends.map(({ alert, policyId, step, row }) => ({
    tenantId: row.tenant_id,
    projectId: row.project_id,
    channelIds: step.channelIds,
    event: {
      type: 'alert_escalated',
      alert,
      escalation: { policy_id: policyId, round: step.round, step: step.step },
      project_id: row.project_id,
      timestamp,
    },
  }));
}

/** Each row's alert, rule and policy, read a project at a time (one statement per kind), and its next due time. */
async function lookUp(rt: Runtime, rows: DueEscalation[], now: number): Promise<Looked[]> {
  const { resources } = rt.ctx;
  const byProject = new Map<string, DueEscalation[]>();
  for (const row of rows) appendTo(byProject, `${row.tenant_id}\0${row.project_id}`, row);
  const looked: Looked[] = [];
  for (const group of byProject.values()) {
    const { tenant_id: tenantId, project_id: projectId } = group[0];
    const dataOf = async (kind: string, ids: (string | undefined)[]) => {
      const found = await resources.getMany(
        tenantId,
        projectId,
        kind,
        ids.filter((id): id is string => !!id),
      );
      return (id: string | undefined) => (id === undefined ? undefined : found.get(id)?.data);
    };
    const alertOf = await dataOf(
      'alert',
      group.map((r) => r.alert_id),
    );
    const ruleOf = await dataOf(
      'alert_rule',
      group.map((r) => alertOf(r.alert_id)?.alert_rule_id as string | undefined),
    );
    const policyIdOf = (row: DueEscalation) =>
      (ruleOf(alertOf(row.alert_id)?.alert_rule_id as string | undefined) as RuleData | undefined)?.escalation_policy_id;
    const policyOf = await dataOf('escalation_policy', group.map(policyIdOf));
    for (const row of group) {
      const alert = alertOf(row.alert_id);
      const policyId = policyIdOf(row);
      const policy = policyOf(policyId) as PolicyData | undefined;
      const firing = alert?.status === 'firing' && policy;
      const firedAt = Date.parse(String(alert?.fired_at));
      // Every step's time, once: those due now, and the first one after now (the row's next due time).
      const times = firing ? stepTimes(policy, firedAt) : [];
      looked.push({ row, alert, policyId, due: times.filter((t) => t.at <= now), next: times.find((t) => t.at > now)?.at });
    }
  }
  return looked;
}

/**
 * Moves each row to its next due time, or deletes it when none is left (UPDATE/DELETE ... WHERE
 * next_due_at = the time read: of several replicas, one moves it), one statement per (time read, next
 * time): alerts fired together move together. Returns the rows this replica moved.
 */
async function moveRows(q: Queryable, looked: Looked[]): Promise<Looked[]> {
  const groups = new Map<string, Looked[]>();
  for (const l of looked) appendTo(groups, `${l.row.next_due_at}:${l.next ?? ''}`, l);
  const moved = new Set<string>();
  for (const group of groups.values()) {
    const ids = padToBucket(group.map((l) => l.row.alert_id));
    const where = `next_due_at = ? AND alert_id IN (${paramList(ids.length)}) RETURNING alert_id`;
    const readAt = Number(group[0].row.next_due_at);
    const { next } = group[0];
    const rows =
      next === undefined
        ? await q.all<{ alert_id: string }>(`DELETE FROM escalations_due WHERE ${where}`, [readAt, ...ids])
        : await q.all<{ alert_id: string }>(`UPDATE escalations_due SET next_due_at = ? WHERE ${where}`, [next, readAt, ...ids]);
    for (const r of rows) moved.add(r.alert_id);
  }
  return looked.filter((l) => moved.has(l.row.alert_id));
}

/**
 * The due steps of the moved rows' firing alerts not sent yet, each claimed in alert_escalations
 * (INSERT ... ON CONFLICT DO NOTHING RETURNING: one replica sends it).
 */
async function claimSteps(rt: Runtime, q: Queryable, moved: Looked[]) {
  const firing = moved.filter((l) => l.due.length);
  const ids = padToBucket(firing.map((l) => l.row.alert_id));
  if (!ids.length) return [];
  const done = new Set(
    (
      await q.all<{ alert_id: string; step_key: string }>(
        `SELECT alert_id, step_key FROM alert_escalations WHERE alert_id IN (${paramList(ids.length)})`,
        ids,
      )
    ).map((r) => `${r.alert_id}\0${r.step_key}`),
  );
  const due = firing.flatMap((l) =>
    l.due.filter((step) => !done.has(`${l.row.alert_id}\0${step.key}`)).map((step) => ({ ...l, alert: l.alert!, step })),
  );
  const notifiedAt = rt.now();
  const mine = new Set<string>();
  // insertRows splits the claims into statements: a part's alerts can each have every step of every
  // round due (a service that was down), 50 steps x 11 rounds, past a statement's parameter limit.
  const claimed = await insertRowsReturning<{ alert_id: string; step_key: string }>(
    q,
    due.map((d) => [d.row.alert_id, d.step.key, d.row.tenant_id, notifiedAt]),
    (values) =>
      `INSERT INTO alert_escalations (alert_id, step_key, tenant_id, notified_at) VALUES ${values} ON CONFLICT (alert_id, step_key) DO NOTHING RETURNING alert_id, step_key`,
  );
  for (const r of claimed) mine.add(`${r.alert_id}\0${r.step_key}`);
  return due.filter((d) => mine.has(`${d.row.alert_id}\0${d.step.key}`));
}
