import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { waitForRun, type Run } from './helpers.js';

/**
 * Issue 18: a resource's run history is bounded (--run-history, default 1,000). At 100,000
 * connectors syncing every 15 minutes an unbounded history grows by 9.6 million runs a day, and
 * every look at a resource's runs (the running-run check, failure counts) grew with it.
 */
describe('run history', () => {
  let svc: TestService;
  let t: TestTenant;
  beforeAll(async () => {
    svc = await startTestService({ runHistory: 3 });
    t = await svc.tenant();
  });
  afterAll(() => svc?.close());

  it('keeps the newest runs of each resource, deleting the oldest finished ones as new ones start', async () => {
    const p = `/projects/${(await svc.project(t, 'history')).id}/connectors`;
    const [a, b] = [
      await svc.ok(t, 'POST', p, { body: { name: 'a', connector_type: 'salesforce', selected_tables: ['Account'] } }),
      await svc.ok(t, 'POST', p, { body: { name: 'b', connector_type: 'salesforce', selected_tables: ['Account'] } }),
    ];
    const started: string[] = [];
    for (let i = 0; i < 5; i++) {
      const run = await svc.ok<{ run_id: string }>(t, 'POST', `${p}/${a.id}/sync`, {}, 201);
      started.push(run.run_id);
      await waitForRun(svc, t, `${p}/${a.id}/runs/${run.run_id}`);
    }
    const other = await svc.ok<{ run_id: string }>(t, 'POST', `${p}/${b.id}/sync`, {}, 201);
    await waitForRun(svc, t, `${p}/${b.id}/runs/${other.run_id}`);
    const runsOf = async (id: string) => (await svc.ok<{ data: Run[] }>(t, 'GET', `${p}/${id}/runs?limit=100`)).data.map((r) => r.id);
    expect((await runsOf(a.id)).sort()).toEqual(started.slice(-3).sort());
    expect(await runsOf(b.id)).toEqual([other.run_id]);
  });
});
