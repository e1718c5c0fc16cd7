import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { BYSTANDER_MAX_MS, whileServingOther } from './support.js';

/**
 * Issue 17: a pipeline of many chained steps, and its run, must not stall other tenants; the
 * lists a tenant can grow have caps (x-max-items) answered with 422 naming the field.
 */
let svc: TestService;
let attacker: TestTenant;
let bystander: TestTenant;
let base: string;
let channelId: string;

beforeAll(async () => {
  svc = await startTestService({ timeScale: 1000 });
  [attacker, bystander] = await Promise.all([svc.tenant(), svc.tenant()]);
  await svc.project(bystander, 'calm');
  base = `/projects/${(await svc.project(attacker, 'big')).id}`;
  // Email without an SMTP server goes to the outbox table: each notification step is pure service work.
  channelId = (
    await svc.ok(attacker, 'POST', `${base}/notification-channels`, {
      body: { name: 'ops', type: 'email', config: { email_addresses: ['ops@example.com'] } },
    })
  ).id;
});
afterAll(() => svc?.close());

/** n notification steps in a chain, declared last-first so the run has to order them. */
const chain = (n: number) =>
  Array.from({ length: n }, (_, k) => {
    const i = n - 1 - k;
    return { name: `s${i}`, type: 'notification', channel_id: channelId, depends_on: i ? [`s${i - 1}`] : [] };
  });

function expect422(res: { status: number; body: any }, field: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(422);
  expect(res.body.error.code).toBe('unprocessable_entity');
  expect(res.body.error.details).toEqual([expect.objectContaining({ field })]);
  expect(res.body.error.message).toContain(field);
}

describe('caps on the lists a tenant can grow', () => {
  it('501 pipeline steps is 422 on steps, and nothing is stored', async () => {
    const { result, probe } = await whileServingOther(svc, bystander, () =>
      svc.call(attacker, 'POST', `${base}/pipelines`, { body: { name: 'too-big', steps: chain(501) } }),
    );
    expect422(result, 'steps');
    expect(result.body.error.message).toContain('at most 500');
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
    expect((await svc.ok(attacker, 'GET', `${base}/pipelines`)).data).toEqual([]);
  });

  it('a PATCH past the cap is 422 too', async () => {
    const small = await svc.ok(attacker, 'POST', `${base}/pipelines`, { body: { name: 'small', steps: chain(2) } });
    expect422(await svc.call(attacker, 'PATCH', `${base}/pipelines/${small.id}`, { body: { steps: chain(501) } }), 'steps');
    await svc.ok(attacker, 'DELETE', `${base}/pipelines/${small.id}`);
  });

  it('dbt models (1,000), alert rule channels and escalation steps / channels (50)', async () => {
    const models = Array.from({ length: 1001 }, (_, i) => ({ name: `m${i}` }));
    expect422(
      await svc.call(attacker, 'POST', `${base}/dbt-projects`, {
        body: { name: 'dbt', repository: 'https://git.example.com/a.git', models },
      }),
      'models',
    );
    const fiftyOne = Array.from({ length: 51 }, () => channelId).map((id, i) => (i ? `${id}-${i}` : id));
    expect422(
      await svc.call(attacker, 'POST', `${base}/escalation-policies`, {
        body: { name: 'esc', steps: [{ delay_minutes: 0, channel_ids: fiftyOne }] },
      }),
      'steps[0].channel_ids',
    );
    const steps = Array.from({ length: 51 }, (_, i) => ({ delay_minutes: i, channel_ids: [channelId] }));
    expect422(await svc.call(attacker, 'POST', `${base}/escalation-policies`, { body: { name: 'esc', steps } }), 'steps');
  });

  it('tables per connector (10,000): a sync writes a record of every table', async () => {
    const tables = (n: number) => Array.from({ length: n }, (_, i) => `public.t${i}`);
    const body = (n: number) => ({ name: `wide-${n}`, connector_type: 'salesforce', selected_tables: tables(n) });
    expect422(await svc.call(attacker, 'POST', `${base}/connectors`, { body: body(10_001) }), 'selected_tables');
    await svc.ok(attacker, 'POST', `${base}/connectors`, { body: body(10_000) });
  });
});

describe('a pipeline at the cap', () => {
  it('500 chained steps are created and run while another tenant is served; the run completes', async () => {
    const { result, probe } = await whileServingOther(svc, bystander, async () => {
      const pipeline = await svc.ok(attacker, 'POST', `${base}/pipelines`, { body: { name: 'at-cap', steps: chain(500) } });
      const started = await svc.ok(attacker, 'POST', `${base}/pipelines/${pipeline.id}/run`, {}, 201);
      const deadline = Date.now() + 60_000;
      for (;;) {
        const run = await svc.ok(attacker, 'GET', `${base}/pipelines/${pipeline.id}/runs/${started.run_id}`);
        if (run.status !== 'running' || Date.now() > deadline) return run;
        await new Promise((r) => setTimeout(r, 100));
      }
    });
    expect(result.status).toBe('succeeded');
    expect(result.steps).toHaveLength(500);
    expect(result.steps.every((s: { status: string }) => s.status === 'completed')).toBe(true);
    expect(probe.failures).toEqual([]);
    expect(probe.count).toBeGreaterThan(5);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
  });
});

describe('GET /metrics', () => {
  it('shows the event-loop delay, on any host, with no tenant data', async () => {
    for (const host of ['localhost', `${bystander.slug}.localhost`]) {
      const res = await svc.http.call('GET', `https://${host}:${svc.port}/metrics`);
      expect(res.status).toBe(200);
      expect(res.text).toMatch(/^dpctl_service_event_loop_delay_max_seconds \d/m);
      expect(res.text).toMatch(/^dpctl_service_event_loop_delay_p99_seconds \d/m);
      expect(res.text).toMatch(/^dpctl_service_process_resident_memory_bytes \d/m);
      expect(res.text).not.toContain(attacker.slug);
    }
  });

  it('asks for the token when one is set, and is gone with metrics: false', async () => {
    const locked = await startTestService({ metricsToken: 'scrape-me' });
    const off = await startTestService({ metrics: false });
    try {
      const url = `https://localhost:${locked.port}/metrics`;
      expect((await locked.http.call('GET', url)).status).toBe(401);
      expect((await locked.http.call('GET', url, { token: 'wrong' })).status).toBe(401);
      expect((await locked.http.call('GET', url, { token: 'scrape-me' })).status).toBe(200);
      expect((await off.http.call('GET', `https://localhost:${off.port}/metrics`)).status).toBe(404);
    } finally {
      await Promise.all([locked.close(), off.close()]);
    }
  });
});
