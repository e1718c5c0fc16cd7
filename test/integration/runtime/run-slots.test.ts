import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { runtimeOf } from '../../../src/service/runtime/runtime.js';
import { schedulerOf } from '../../../src/service/runtime/scheduler.js';
import { simulatedSyncSeconds } from '../../../src/service/runtime/sources.js';
import { eventually, expectError, waitForRun, type Run } from './helpers.js';

/**
 * Issue 18: one tenant may have at most --max-runs-per-tenant top-level runs executing at once on an
 * instance. Before, only the rate limit (per endpoint per minute) bounded manual triggers, so one
 * read-write key could have thousands of syncs executing beside every other tenant's.
 */
const CAP = 2;
/** Each simulated sync lasts about this long (the time scale is set from it). */
const SYNC_MS = 1_500;

describe('runs executing at once per tenant', () => {
  let now = Date.parse('2026-03-01T10:00:00Z');
  let svc: TestService;
  let owner: TestTenant;
  let other: TestTenant;

  beforeAll(async () => {
    const timeScale = (simulatedSyncSeconds('Account') * 1000) / SYNC_MS;
    svc = await startTestService({ maxRunsPerTenant: CAP, timeScale, clock: () => now });
    [owner, other] = [await svc.tenant(), await svc.tenant()];
  });
  afterAll(() => svc?.close());

  async function connectors(t: TestTenant, project: string, count: number, extra: object = {}) {
    const base = `/projects/${(await svc.project(t, project)).id}`;
    const ids: string[] = [];
    for (let i = 0; i < count; i++)
      ids.push(
        (
          await svc.ok(t, 'POST', `${base}/connectors`, {
            body: { name: `c${i}`, connector_type: 'salesforce', selected_tables: ['Account'], ...extra },
          })
        ).id,
      );
    return { base, ids };
  }
  const sync = (t: TestTenant, base: string, id: string) => svc.call(t, 'POST', `${base}/connectors/${id}/sync`);
  const runsOf = async (t: TestTenant, base: string, id: string) =>
    (await svc.ok<{ data: Run[] }>(t, 'GET', `${base}/connectors/${id}/runs`)).data;

  it('refuses a manual trigger past the cap with 429 and Retry-After, stores nothing, and leaves other tenants alone', async () => {
    const { base, ids } = await connectors(owner, 'manual', CAP + 1);
    const started = [];
    for (const id of ids.slice(0, CAP)) {
      const res = await sync(owner, base, id);
      expect(res.status, res.text).toBe(201);
      started.push({ id, run: res.body.run_id as string });
    }
    const refused = await sync(owner, base, ids[CAP]);
    expectError(refused, 429, 'rate_limited', new RegExp(`already has ${CAP} runs executing`));
    expect(refused.headers['retry-after']).toBe('5');
    expect(await runsOf(owner, base, ids[CAP])).toEqual([]);
    expect((await svc.ok(owner, 'GET', `${base}/connectors/${ids[CAP]}`)).status).not.toBe('syncing');

    // Another tenant's run starts at once.
    const theirs = await connectors(other, 'theirs', 1);
    expect((await sync(other, theirs.base, theirs.ids[0])).status).toBe(201);

    // A run that ends gives its slot back.
    for (const s of started) expect((await waitForRun(svc, owner, `${base}/connectors/${s.id}/runs/${s.run}`)).status).toBe('succeeded');
    expect(runtimeOf(svc.service.ctx).runSlots.count(await tenantIdOf(owner))).toBe(0);
    const again = await sync(owner, base, ids[CAP]);
    expect(again.status, again.text).toBe(201);
    await waitForRun(svc, owner, `${base}/connectors/${ids[CAP]}/runs/${again.body.run_id}`);
  }, 30_000);

  it('gives the slot back when a trigger is refused for another reason', async () => {
    const { base, ids } = await connectors(owner, 'conflicts', 1);
    const first = await sync(owner, base, ids[0]);
    expect(first.status).toBe(201);
    // Already syncing: 409, many times over; none of these may keep a slot.
    for (let i = 0; i < CAP + 2; i++) expectError(await sync(owner, base, ids[0]), 409, 'conflict', /already syncing/);
    expect(runtimeOf(svc.service.ctx).runSlots.count(await tenantIdOf(owner))).toBe(1);
    await waitForRun(svc, owner, `${base}/connectors/${ids[0]}/runs/${first.body.run_id}`);
    expect(runtimeOf(svc.service.ctx).runSlots.count(await tenantIdOf(owner))).toBe(0);
  }, 30_000);

  it('leaves a scheduled tick due while the tenant is at its cap, and starts it when a slot frees', async () => {
    const { base, ids } = await connectors(owner, 'busy', CAP);
    const scheduled = await connectors(owner, 'scheduled', 1, { schedule: '* * * * *' });
    const scheduler = schedulerOf(runtimeOf(svc.service.ctx));
    await scheduler.tick(); // the scheduler's first look: nothing of the new schedule is due yet
    const running = [];
    for (const id of ids) running.push({ id, run: (await sync(owner, base, id)).body.run_id as string });
    // Past three ticks: a tick is due up to its spread later, at most 60 s / time scale (66 s here).
    now += 180_000;
    await scheduler.tick();
    await scheduler.queue.idle();
    expect(await runsOf(owner, scheduled.base, scheduled.ids[0])).toEqual([]);
    const tickRows = await svc.service.ctx.db.all('SELECT 1 FROM schedule_ticks WHERE resource_id = ?', [scheduled.ids[0]]);
    expect(tickRows).toEqual([]);

    for (const r of running) await waitForRun(svc, owner, `${base}/connectors/${r.id}/runs/${r.run}`);
    const runs = await eventually(async () => {
      await scheduler.tick();
      await scheduler.queue.idle();
      const found = await runsOf(owner, scheduled.base, scheduled.ids[0]);
      return found.length ? found : undefined;
    });
    // Only the latest due tick runs, as after any late look.
    expect(runs).toHaveLength(1);
    expect(runs[0].trigger).toBe('schedule');
    await waitForRun(svc, owner, `${scheduled.base}/connectors/${scheduled.ids[0]}/runs/${runs[0].id}`);
  }, 30_000);

  it('does not count the steps of a pipeline run: the run holds one slot', async () => {
    const { base, ids } = await connectors(owner, 'pipeline', CAP + 1);
    const pipeline = await svc.ok(owner, 'POST', `${base}/pipelines`, {
      body: {
        name: 'all',
        steps: ids.map((id, i) => ({ name: `sync_${i}`, type: 'connector_sync', connector_id: id })),
      },
    });
    const { run_id } = await svc.ok(owner, 'POST', `${base}/pipelines/${pipeline.id}/run`, {}, 201);
    // Its CAP + 1 steps run at once (independent steps), yet one more top-level run still fits under CAP.
    await eventually(async () => runtimeOf(svc.service.ctx).active >= CAP + 2);
    expect(runtimeOf(svc.service.ctx).runSlots.count(await tenantIdOf(owner))).toBe(1);
    const run = await waitForRun(svc, owner, `${base}/pipelines/${pipeline.id}/runs/${run_id}`);
    expect(run.status).toBe('succeeded');
  }, 30_000);

  async function tenantIdOf(t: TestTenant): Promise<string> {
    const row = await svc.service.ctx.db.get<{ id: string }>('SELECT id FROM tenants WHERE slug = ?', [t.slug]);
    return row!.id;
  }
});
