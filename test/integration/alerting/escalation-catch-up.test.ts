import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { runtimeOf } from '../../../src/service/runtime/runtime.js';
import { schedulerOf } from '../../../src/service/runtime/scheduler.js';
import type { Db, Queryable } from '../../../src/service/store/db.js';

/**
 * Issue 18: the largest policy (50 steps, repeated 10 more times) after a stop longer than all its
 * rounds has 550 steps due per alert. A look used to claim and queue every due step of a batch of
 * 100 alerts in one transaction (55,000 claims and as many queued notifications); it now commits
 * at most 1,000 steps at a time (an alert's own 550 never split), and still sends each step once.
 */
const MINUTE = 60_000;
const STEPS = 50;
const ROUNDS = 11;
const ALERTS = 3;

describe('escalation catching up after a long stop', () => {
  let now = Date.parse('2026-03-01T10:00:30Z');
  let svc: TestService;
  let t: TestTenant;
  const count = async (sql: string) => Number((await svc.service.ctx.db.get<{ n: number }>(sql))!.n);
  const scheduler = () => schedulerOf(runtimeOf(svc.service.ctx));
  const look = async () => {
    await scheduler().tick();
    await scheduler().alerting.idle();
  };

  beforeAll(async () => {
    svc = await startTestService({ clock: () => now });
    t = await svc.tenant();
    const base = `/projects/${(await svc.project(t, 'catch-up')).id}`;
    for (let i = 0; i < ALERTS; i++)
      await svc.ok(t, 'POST', `${base}/connectors`, {
        body: { name: `c${i}`, connector_type: 'salesforce', selected_tables: ['Account'] },
      });
    const mail = await svc.ok(t, 'POST', `${base}/notification-channels`, {
      body: { name: 'oncall', type: 'email', config: { email_addresses: ['oncall@example.com'] } },
    });
    const policy = await svc.ok(t, 'POST', `${base}/escalation-policies`, {
      body: {
        name: 'longest',
        steps: Array.from({ length: STEPS }, (_, i) => ({ delay_minutes: i + 1, channel_ids: [mail.id] })),
        repeat: ROUNDS - 1,
      },
    });
    await svc.ok(t, 'POST', `${base}/alert-rules`, {
      body: {
        name: 'stale',
        severity: 'warning',
        condition: { metric: 'freshness_minutes', operator: 'gt', threshold: 30 },
        escalation_policy_id: policy.id,
      },
    });
  }, 60_000);
  afterAll(() => svc?.close());

  it('claims and queues every missed step once, at most 1,000 (or one alert) per transaction', async () => {
    await look();
    now += 31 * MINUTE;
    await look();
    expect(await count(`SELECT COUNT(*) AS n FROM resources WHERE kind = 'alert'`)).toBe(ALERTS);
    // Every step of every round is due: the service was stopped for longer than the rounds last.
    now += (ROUNDS * STEPS + 10) * MINUTE;

    // Each transaction's new claims, counted inside it.
    const db = svc.service.ctx.db as Db;
    const claims = (q: Queryable) => q.get<{ n: number }>('SELECT COUNT(*) AS n FROM alert_escalations').then((r) => Number(r!.n));
    const perTx: number[] = [];
    const original = db.tx;
    const tx = original.bind(db);
    db.tx = (fn) =>
      tx(async (q) => {
        const before = await claims(q);
        const result = await fn(q);
        perTx.push((await claims(q)) - before);
        return result;
      });
    try {
      await look();
    } finally {
      db.tx = original;
    }
    const claimed = perTx.filter((n) => n > 0);
    // 550 + 550 would be 1,100: each alert's steps are a transaction of their own.
    expect(claimed).toEqual(Array(ALERTS).fill(STEPS * ROUNDS));
    expect(await count('SELECT COUNT(*) AS n FROM alert_escalations')).toBe(ALERTS * STEPS * ROUNDS);
    // Sent once each (to the outbox), and nothing is left queued or due.
    expect(
      await count(`SELECT COUNT(*) AS n FROM notification_deliveries WHERE event_type = 'alert_escalated' AND status = 'delivered'`),
    ).toBe(ALERTS * STEPS * ROUNDS);
    expect(await count('SELECT COUNT(*) AS n FROM notification_queue')).toBe(0);
    expect(await count('SELECT COUNT(*) AS n FROM escalations_due')).toBe(0);
    now += 60 * MINUTE;
    await look();
    expect(await count('SELECT COUNT(*) AS n FROM alert_escalations')).toBe(ALERTS * STEPS * ROUNDS);
  }, 120_000);
});
