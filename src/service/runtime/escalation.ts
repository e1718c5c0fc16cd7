import type { Runtime } from './runtime.js';
import type { RuleData } from './alerts.js';
import { notifyChannels } from './notifications.js';

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
 * Acknowledging (or resolving) the alert stops the escalation: only firing alerts are looked at.
 */
export function dueSteps(policy: PolicyData, firedAtMs: number, nowMs: number): { key: string; channelIds: string[]; round: number; step: number }[] {
  const steps = policy.steps ?? [];
  if (!steps.length) return [];
  const round = Math.max(1, ...steps.map((s) => s.delay_minutes)) * 60_000;
  const due: { key: string; channelIds: string[]; round: number; step: number }[] = [];
  for (let r = 0; r <= (policy.repeat ?? 0); r++) {
    steps.forEach((s, i) => {
      if (firedAtMs + r * round + s.delay_minutes * 60_000 <= nowMs) due.push({ key: `${r}:${i}`, channelIds: s.channel_ids, round: r, step: i });
    });
  }
  return due;
}

export async function escalate(rt: Runtime, track: <T>(p: Promise<T>) => Promise<T>): Promise<void> {
  const db = rt.ctx.db;
  const statusExpr = db.dialect === 'sqlite' ? "json_extract(data, '$.status')" : "(data::jsonb ->> 'status')";
  const firing = await db.all<{ id: string; tenant_id: string; project_id: string; parent_id: string; data: string }>(
    `SELECT id, tenant_id, project_id, parent_id, data FROM resources WHERE kind = 'alert' AND ${statusExpr} = 'firing'`,
  );
  if (!firing.length) return;
  const now = rt.nowMs();
  const rules = new Map<string, RuleData | undefined>();
  const policies = new Map<string, PolicyData | undefined>();
  for (const row of firing) {
    const alert = JSON.parse(row.data) as Record<string, unknown>;
    const ruleId = String(alert.alert_rule_id ?? row.parent_id);
    if (!rules.has(ruleId)) rules.set(ruleId, (await rt.ctx.resources.get(row.tenant_id, row.project_id, 'alert_rule', ruleId))?.data as RuleData | undefined);
    const policyId = rules.get(ruleId)?.escalation_policy_id;
    if (!policyId) continue;
    if (!policies.has(policyId)) policies.set(policyId, (await rt.ctx.resources.get(row.tenant_id, row.project_id, 'escalation_policy', policyId))?.data as PolicyData | undefined);
    const policy = policies.get(policyId);
    if (!policy) continue;
    const due = dueSteps(policy, Date.parse(String(alert.fired_at)), now);
    if (!due.length) continue;
    const done = new Set((await db.all<{ step_key: string }>('SELECT step_key FROM alert_escalations WHERE alert_id = ?', [row.id])).map((r) => r.step_key));
    for (const step of due) {
      if (done.has(step.key)) continue;
      const claimed = await db.run('INSERT INTO alert_escalations (alert_id, step_key, tenant_id, notified_at) VALUES (?, ?, ?, ?) ON CONFLICT (alert_id, step_key) DO NOTHING', [row.id, step.key, row.tenant_id, rt.now()]);
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
}
