import { describe, expect, it } from 'vitest';
import { deferChanges } from '../../../src/controller/defer.js';
import { makePlan } from '../../../src/engine/index.js';
import { config, emptyState, PLAN_OPTIONS, SHOP } from '../engine/fixtures.js';

/** Holding back what backs off, and the writes that need it, from a plan (controller/defer.ts). */
describe('deferChanges', () => {
  // SHOP (a project, channel a, an escalation policy that references a) and an unrelated channel b.
  const shop = config(`${SHOP}---
apiVersion: dataplatform/v1
kind: NotificationChannel
metadata: { name: b, project: shop }
spec: { type: email, config: { email_addresses: [b@example.com] } }
`);
  const plan = makePlan(shop.documents, emptyState(), shop.secrets, PLAN_OPTIONS);
  const keyOf = (name: string) => plan.changes.find((c) => c.name === name)!.key;
  const deferredOf = (backingOff: string) => {
    const out = deferChanges(plan, (key) => (key === keyOf(backingOff) ? 'backing off (3 failures)' : undefined));
    return { kept: out.plan.changes.map((c) => c.name), deferred: [...out.deferred].map(([c, why]) => [c.name, why]) };
  };

  it('holds the resource that backs off and what references it; the rest is applied', () => {
    expect(deferredOf('a')).toEqual({
      kept: ['shop', 'b'],
      deferred: [
        ['a', 'backing off (3 failures)'],
        ['escalate', 'waits for NotificationChannel shop/a, which is backing off'],
      ],
    });
  });

  it('holds everything inside a project that backs off, through the chain of references', () => {
    expect(deferredOf('shop')).toEqual({
      kept: [],
      deferred: [
        ['shop', 'backing off (3 failures)'],
        ['a', 'waits for Project shop, which is backing off'],
        ['escalate', 'waits for Project shop, which is backing off'],
        ['b', 'waits for Project shop, which is backing off'],
      ],
    });
  });

  it('returns the plan itself when nothing backs off', () => {
    const out = deferChanges(plan, () => undefined);
    expect(out.plan).toBe(plan);
    expect(out.deferred.size).toBe(0);
  });
});
