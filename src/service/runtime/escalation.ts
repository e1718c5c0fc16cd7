import type { Runtime } from './runtime.js';
import type { RuleData } from './alerts.js';
import { notifyChannels } from './notifications.js';
import { slicer } from './slices.js';

interface PolicyData {
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
 * `escalations_due` (alerts.ts), and a look reads only the rows due now, in batches. Each is moved
 * to the alert's next step time (UPDATE ... WHERE next_due_at = the time read: one replica moves
 * it), or deleted when no step is left or the alert is no longer firing: acknowledging or resolving
 * it stops the escalation at its next due time. The rule's policy is read when a step is due, so a
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

/** Rows of escalations_due read per query. */
const ESCALATION_BATCH = 100;

interface DueEscalation {
  alert_id: string;
  tenant_id: string;
  project_id: string;
  next_due_at: number;
}

export async function escalate(rt: Runtime, track: <T>(p: Promise<T>) => Promise<T>, stopped: () => boolean = () => false): Promise<void> {
  const now = rt.nowMs();
  const slice = slicer();
  for (;;) {
    if (stopped()) return;
    const rows = await rt.ctx.db.all<DueEscalation>(
      'SELECT alert_id, tenant_id, project_id, next_due_at FROM escalations_due WHERE next_due_at <= ? ORDER BY next_due_at LIMIT ?',
      [now, ESCALATION_BATCH],
    );
    for (const row of rows) {
      await escalateOne(rt, row, now, track);
      await slice();
    }
    if (rows.length < ESCALATION_BATCH) return;
  }
}

/** Sends the steps of one alert that are due and not yet sent, and moves its row to the next step. */
async function escalateOne(rt: Runtime, row: DueEscalation, now: number, track: <T>(p: Promise<T>) => Promise<T>): Promise<void> {
  const { db, resources } = rt.ctx;
  const readAt = Number(row.next_due_at);
  const alert = (await resources.get(row.tenant_id, row.project_id, 'alert', row.alert_id))?.data;
  const rule = alert
    ? ((await resources.get(row.tenant_id, row.project_id, 'alert_rule', String(alert.alert_rule_id)))?.data as RuleData | undefined)
    : undefined;
  const policyId = rule?.escalation_policy_id;
  const policy = policyId
    ? ((await resources.get(row.tenant_id, row.project_id, 'escalation_policy', policyId))?.data as PolicyData | undefined)
    : undefined;
  const firedAt = Date.parse(String(alert?.fired_at));
  const next = alert?.status === 'firing' && policy ? stepTimes(policy, firedAt).find((s) => s.at > now)?.at : undefined;
  const moved =
    next === undefined
      ? await db.run('DELETE FROM escalations_due WHERE alert_id = ? AND next_due_at = ?', [row.alert_id, readAt])
      : await db.run('UPDATE escalations_due SET next_due_at = ? WHERE alert_id = ? AND next_due_at = ?', [next, row.alert_id, readAt]);
  if (moved.changes !== 1 || !alert || alert.status !== 'firing' || !policy) return; // another replica has it, or nothing to send
  const done = new Set(
    (await db.all<{ step_key: string }>('SELECT step_key FROM alert_escalations WHERE alert_id = ?', [row.alert_id])).map(
      (r) => r.step_key,
    ),
  );
  for (const step of dueSteps(policy, firedAt, now)) {
    if (done.has(step.key)) continue;
    const claimed = await db.run(
      'INSERT INTO alert_escalations (alert_id, step_key, tenant_id, notified_at) VALUES (?, ?, ?, ?) ON CONFLICT (alert_id, step_key) DO NOTHING',
      [row.alert_id, step.key, row.tenant_id, rt.now()],
    );
    if (claimed.changes !== 1) continue;
    void track(
      notifyChannels(rt, row.tenant_id, row.project_id, step.channelIds, {
        type: 'alert_escalated',
        alert,
        escalation: { policy_id: policyId, round: step.round, step: step.step },
        project_id: row.project_id,
        timestamp: rt.now(),
      }),
    );
  }
}
