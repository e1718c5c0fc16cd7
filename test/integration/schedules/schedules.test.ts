import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import { createSourceDb, eventually, waitForRun, type Run, type SourceDb } from '../runtime/helpers.js';

/**
 * Cron schedules start runs (trigger: schedule) on the service clock, which the tests move:
 * `now` is a variable the clock reads. Simulated work runs 1000 times faster (timeScale), and
 * the scheduler looks every 5 s / 1000 (at least 20 ms).
 */
const START = Date.parse('2026-03-01T10:00:30Z');
const LONG_TTL = 30 * 24 * 3600;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('schedules on one service', () => {
  let now = START;
  let svc: TestService;
  let t: TestTenant;
  let base: string;
  let src: SourceDb;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    [svc, src] = await Promise.all([startTestService({ clock: () => now, timeScale: 1000, accessTokenTtl: LONG_TTL }), createSourceDb(2)]);
    t = await svc.tenant();
    base = `/projects/${(await svc.project(t, 'schedules')).id}`;
    ids.crm = (
      await svc.ok(t, 'POST', `${base}/connectors`, {
        body: { name: 'crm', connector_type: 'salesforce', selected_tables: ['Account'], schedule: '*/5 * * * *' },
      })
    ).id;
    ids.manual = (
      await svc.ok(t, 'POST', `${base}/connectors`, {
        body: { name: 'manual', connector_type: 'salesforce', selected_tables: ['Account'] },
      })
    ).id;
    ids.slow = (
      await svc.ok(t, 'POST', `${base}/connectors`, {
        body: {
          name: 'slow',
          connector_type: 'postgresql',
          config: { host: src.host, port: src.port, database: src.database, schema: 'shop', ssl_mode: 'disable' },
          credentials: { username: src.admin.username },
          selected_tables: ['slow.sleepy'],
          schedule: '0 * * * *',
        },
      })
    ).id;
    ids.channel = (
      await svc.ok(t, 'POST', `${base}/notification-channels`, {
        body: { name: 'mail', type: 'email', config: { email_addresses: ['ops@example.com'] } },
      })
    ).id;
    const steps = [{ name: 'tell', type: 'notification', channel_id: ids.channel }];
    ids.on = (await svc.ok(t, 'POST', `${base}/pipelines`, { body: { name: 'on', schedule: '*/5 * * * *', steps } })).id;
    ids.off = (await svc.ok(t, 'POST', `${base}/pipelines`, { body: { name: 'off', schedule: '*/5 * * * *', enabled: false, steps } })).id;
  });
  afterAll(() => svc?.close());

  const runs = async (kind: 'connectors' | 'pipelines', id: string) =>
    (await svc.ok<{ data: Run[] }>(t, 'GET', `${base}/${kind}/${id}/runs?limit=100`)).data;
  const ticks = (id: string) =>
    svc.service.ctx.db.all<{ tick: string; outcome: string; run_id: string | null; detail: string | null }>(
      'SELECT tick, outcome, run_id, detail FROM schedule_ticks WHERE resource_id = ? ORDER BY tick',
      [id],
    );

  it('starts nothing before the first tick', async () => {
    await sleep(150);
    expect(await runs('connectors', ids.crm)).toEqual([]);
    expect(await ticks(ids.crm)).toEqual([]);
  });

  it('starts one scheduled sync and one pipeline run per tick, and nothing between ticks', async () => {
    now = Date.parse('2026-03-01T10:05:02Z');
    const [first] = await eventually(async () => {
      const r = await runs('connectors', ids.crm);
      return r.length ? r : undefined;
    });
    expect(first.trigger).toBe('schedule');
    expect(first.started_at).toBe('2026-03-01T10:05:02.000Z');
    await waitForRun(svc, t, `${base}/connectors/${ids.crm}/runs/${first.id}`);
    const pipelineRun = await eventually(async () => (await runs('pipelines', ids.on))[0]);
    expect(pipelineRun.trigger).toBe('schedule');

    now = Date.parse('2026-03-01T10:07:00Z');
    await sleep(200);
    expect(await runs('connectors', ids.crm)).toHaveLength(1);
    expect(await ticks(ids.crm)).toEqual([{ tick: '2026-03-01T10:05:00.000Z', outcome: 'started', run_id: first.id, detail: null }]);

    // A jump over several ticks runs the latest one only.
    now = Date.parse('2026-03-01T10:21:00Z');
    await eventually(async () => (await runs('connectors', ids.crm)).length === 2);
    await sleep(200);
    expect(await runs('connectors', ids.crm)).toHaveLength(2);
    expect((await ticks(ids.crm)).map((r) => r.tick)).toEqual(['2026-03-01T10:05:00.000Z', '2026-03-01T10:20:00.000Z']);
    expect(await runs('connectors', ids.manual)).toEqual([]);
  });

  it('does not schedule a disabled pipeline', async () => {
    expect(await runs('pipelines', ids.off)).toEqual([]);
    expect(await ticks(ids.off)).toEqual([]);
    expect((await runs('pipelines', ids.on)).length).toBeGreaterThanOrEqual(2);
  });

  it('skips (and records) a tick while the connector is still syncing', async () => {
    now = Date.parse('2026-03-01T11:00:00Z');
    const started = await eventually(async () => (await runs('connectors', ids.slow))[0]);
    expect(started.status).toBe('running');
    now = Date.parse('2026-03-01T12:00:00Z');
    const skipped = await eventually(async () =>
      (await ticks(ids.slow)).find((r) => r.tick === '2026-03-01T12:00:00.000Z' && r.outcome !== 'claimed'),
    );
    expect(skipped.outcome).toBe('skipped');
    expect(skipped.detail).toMatch(/already syncing/);
    expect(await runs('connectors', ids.slow)).toHaveLength(1);
    const done = await waitForRun(svc, t, `${base}/connectors/${ids.slow}/runs/${started.id}`);
    expect(done.status).toBe('succeeded');
  });
});

describe.skipIf(testStore() !== 'postgres')('schedules with two replicas on one PostgreSQL database', () => {
  let now = START;
  let a: TestService;
  let b: TestService;
  let t: TestTenant;
  let base: string;
  let connectorId: string;

  beforeAll(async () => {
    a = await startTestService({ clock: () => now, timeScale: 1000, accessTokenTtl: LONG_TTL });
    b = await startTestService({
      clock: () => now,
      timeScale: 1000,
      accessTokenTtl: LONG_TTL,
      databaseUrl: a.service.ctx.options.databaseUrl,
    });
    t = await a.tenant();
    base = `/projects/${(await a.project(t, 'replicas')).id}`;
    connectorId = (
      await a.ok(t, 'POST', `${base}/connectors`, {
        body: { name: 'crm', connector_type: 'salesforce', selected_tables: ['Account'], schedule: '* * * * *' },
      })
    ).id;
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('starts exactly one run per tick', async () => {
    for (let i = 1; i <= 3; i++) {
      now = START + i * 60_000;
      await eventually(
        async () => (await a.ok<{ data: Run[] }>(t, 'GET', `${base}/connectors/${connectorId}/runs?limit=100`)).data.length >= i,
      );
      await sleep(150);
      const runs = (await a.ok<{ data: Run[] }>(t, 'GET', `${base}/connectors/${connectorId}/runs?limit=100`)).data;
      expect(runs, JSON.stringify(runs)).toHaveLength(i);
      for (const r of runs) await waitForRun(a, t, `${base}/connectors/${connectorId}/runs/${r.id}`);
    }
    const claims = await a.service.ctx.db.all<{ instance_id: string }>('SELECT instance_id FROM schedule_ticks WHERE resource_id = ?', [
      connectorId,
    ]);
    expect(claims).toHaveLength(3);
  });
});
