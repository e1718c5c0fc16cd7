import { describe, expect, it } from 'vitest';
import { makePlan, makePlanInTurns } from '../../../src/engine/plan.js';
import { appliedState, config, PLAN_OPTIONS } from './fixtures.js';
import { turnsDuring } from '../../support/event-loop.js';

/**
 * The controller plans in turns (makePlanInTurns), so that it answers /healthz and webhooks
 * meanwhile: a plan of 101,000 documents in one go held its event loop for 3 s. The plan must be
 * exactly makePlan's.
 */
const connectors = (n: number, schedule: (i: number) => string) =>
  [
    'apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: shop\nspec: {}\n',
    ...Array.from(
      { length: n },
      (_, i) => `apiVersion: dataplatform/v1
kind: Connector
metadata:
  name: c-${i}
  project: shop
spec:
  connector_type: postgresql
  config: { host: db-${i}.internal, port: 5432, database: shop }
  schedule: "${schedule(i)}"
`,
    ),
  ].join('---\n');

describe('makePlanInTurns', () => {
  it('plans exactly what makePlan plans (creates, updates, no-ops, prune), letting the event loop turn meanwhile', async () => {
    // Applied with the yearly schedule; every third connector's schedule changed since.
    const applied = appliedState(config(connectors(3_000, () => '0 0 1 1 *')));
    const now = config(connectors(3_300, (i) => (i % 3 ? '0 0 1 1 *' : '0 1 1 1 *')));
    for (const options of [PLAN_OPTIONS, { ...PLAN_OPTIONS, prune: true }]) {
      const inOneGo = await turnsDuring(async () => makePlan(now.documents, applied, now.secrets, options));
      const inTurns = await turnsDuring(() => makePlanInTurns(now.documents, applied, now.secrets, options));
      expect(inOneGo.turns).toBe(0);
      expect(inTurns.turns).toBeGreaterThan(0);
      expect(inTurns.result).toEqual(inOneGo.result);
      expect(inTurns.result.summary).toMatchObject({ create: 300, update: 1_000, 'no-op': 2_001 });
    }
  });
});
