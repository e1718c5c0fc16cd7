import { createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { runtimeOf } from '../../src/service/runtime/runtime.js';
import { STEP_CONCURRENCY } from '../../src/service/runtime/pipelines.js';
import { ProgressTurns, StepBudget, TENANT_STEP_CONCURRENCY } from '../../src/service/runtime/tenant-work.js';
import { Stopped } from '../../src/service/runtime/runtime.js';
import { BYSTANDER_MAX_MS, whileServingOther } from './support.js';

/**
 * Many concurrent pipeline runs of one tenant, each within the limits (runs per tenant, steps per
 * run): STEP_CONCURRENCY bounded the steps of one run, not of a tenant, so 40 runs of 500
 * notification steps had 400 steps executing at once, and another tenant's answers went from
 * p99 ~10 ms to 630-720 ms for 20 s. The tenant's steps now share one budget across its runs
 * (TENANT_STEP_CONCURRENCY), handed out first come, first served.
 */
const RUNS = 24;
const STEPS = 25;
const RECEIVER_MS = 50;

let svc: TestService;
let attacker: TestTenant;
let bystander: TestTenant;
let receiver: { url: string; close(): Promise<void> };

/** A webhook receiver that answers each POST after RECEIVER_MS: each step is running that long at least. */
async function slowReceiver() {
  const srv = createServer((req, res) => {
    req.resume();
    req.on('end', () => setTimeout(() => res.writeHead(200).end('{}'), RECEIVER_MS));
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(srv.address() as { port: number }).port}/hook`,
    close: () => new Promise<void>((r) => (srv.closeAllConnections(), srv.close(() => r()))),
  };
}

beforeAll(async () => {
  [svc, receiver] = await Promise.all([startTestService({ timeScale: 1000 }), slowReceiver()]);
  [attacker, bystander] = await Promise.all([svc.tenant(), svc.tenant()]);
  await svc.project(bystander, 'calm');
});
afterAll(async () => {
  await svc?.close();
  await receiver?.close();
});

describe("one tenant's concurrent pipeline runs", () => {
  it(`execute at most ${TENANT_STEP_CONCURRENCY} steps at once between them, in turn, while another tenant is served`, async () => {
    const base = `/projects/${(await svc.project(attacker, 'many')).id}`;
    const channel = await svc.ok(attacker, 'POST', `${base}/notification-channels`, {
      body: { name: 'hook', type: 'webhook', config: { url: receiver.url } },
    });
    // Independent steps: each run would execute STEP_CONCURRENCY of them at once.
    const steps = Array.from({ length: STEPS }, (_, i) => ({ name: `s${i}`, type: 'notification', channel_id: channel.id }));
    const pipelines: string[] = [];
    for (let i = 0; i < RUNS; i++)
      pipelines.push((await svc.ok(attacker, 'POST', `${base}/pipelines`, { body: { name: `p${i}`, steps } })).id);
    const tenantId = (await svc.service.ctx.tenants.bySlug(attacker.slug))!.id;

    // Steps running now, per run and for the tenant, from the runtime's step events (what the streams send).
    const running = new Map<string, number>();
    let now = 0;
    let most = 0;
    const firstStep = new Map<string, number>();
    const onStep = (t: string, e: { run_id: string; message: { status: string } }) => {
      if (t !== tenantId) return;
      if (e.message.status === 'running') {
        firstStep.set(e.run_id, firstStep.get(e.run_id) ?? performance.now());
        running.set(e.run_id, (running.get(e.run_id) ?? 0) + 1);
        most = Math.max(most, ++now);
      } else if (e.message.status === 'completed' || e.message.status === 'failed') {
        running.set(e.run_id, running.get(e.run_id)! - 1);
        now--;
      }
    };
    const rt = runtimeOf(svc.service.ctx);
    rt.events.on('step_update', onStep);
    try {
      const { result: runs, probe } = await whileServingOther(svc, bystander, async () => {
        const started = await Promise.all(
          pipelines.map(async (id) => ({
            id,
            run: (await svc.ok(attacker, 'POST', `${base}/pipelines/${id}/run`, {}, 201)).run_id as string,
          })),
        );
        const ended: { run: any; at: number }[] = [];
        const deadline = Date.now() + 25_000;
        for (const { id, run } of started)
          for (;;) {
            const r = await svc.ok(attacker, 'GET', `${base}/pipelines/${id}/runs/${run}`);
            if (r.status !== 'running' || Date.now() > deadline) {
              ended.push({ run: r, at: Date.parse(r.finished_at ?? new Date().toISOString()) });
              break;
            }
            await new Promise((res) => setTimeout(res, 50));
          }
        return ended;
      });
      for (const { run } of runs) {
        expect(run.status).toBe('succeeded');
        expect(run.steps.map((s: { status: string }) => s.status)).toEqual(Array(STEPS).fill('completed'));
      }
      // Without the budget: STEP_CONCURRENCY per run, RUNS x STEP_CONCURRENCY for the tenant.
      expect(most).toBeGreaterThan(STEP_CONCURRENCY);
      expect(most).toBeLessThanOrEqual(TENANT_STEP_CONCURRENCY);
      // In turn: every run had begun before any run ended (no run waits behind the others' whole work).
      expect(firstStep.size).toBe(RUNS);
      const firstEnd = Math.min(...runs.map((r) => Date.parse(r.run.finished_at)));
      const lastStart = Math.max(...runs.map((r) => Date.parse(r.run.steps.map((s: { started_at: string }) => s.started_at).sort()[0])));
      expect(lastStart).toBeLessThanOrEqual(firstEnd);
      expect(probe.failures).toEqual([]);
      expect(probe.count).toBeGreaterThan(5);
      expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
      expect(rt.runSlots.count(tenantId)).toBe(0);
    } finally {
      rt.events.off('step_update', onStep);
    }
  }, 40_000);
});

describe('StepBudget', () => {
  it('hands slots out first come, first served, per tenant, and lets a waiting step go when its run stops', async () => {
    const budget = new StepBudget(2);
    const live = new AbortController().signal;
    const [a, b] = await Promise.all([budget.take('t1', live), budget.take('t1', live)]);
    // Another tenant is not behind t1's.
    (await budget.take('t2', live))();
    const order: string[] = [];
    const stop = new AbortController();
    const waiting = [
      budget.take('t1', live).then((r) => (order.push('c'), r)),
      budget.take('t1', stop.signal).then(
        () => order.push('stopped run got a slot'),
        (err) => (expect(err).toBeInstanceOf(Stopped), order.push('d stopped')),
      ),
      budget.take('t1', live).then((r) => (order.push('e'), r)),
    ];
    expect(budget.waiting('t1')).toBe(3);
    stop.abort();
    a();
    a(); // given back once only
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['d stopped', 'c']);
    expect(budget.active('t1')).toBe(2);
    b();
    const [c, , e] = (await Promise.all(waiting)) as [() => void, unknown, () => void];
    expect(order).toEqual(['d stopped', 'c', 'e']);
    c();
    e();
    expect(budget.active('t1')).toBe(0);
    await expect(budget.take('t1', stop.signal)).rejects.toBeInstanceOf(Stopped);
  });
});

describe('ProgressTurns', () => {
  it("runs one tenant's progress writes one at a time, in order, with a pause of (duty - 1) x each write between them", async () => {
    const turns = new ProgressTurns(10);
    const log: string[] = [];
    let open = 0;
    const write =
      (name: string, ms: number, wrote = true) =>
      async () => {
        expect(++open).toBe(1);
        log.push(`${name}@${Math.round(performance.now())}`);
        await new Promise((r) => setTimeout(r, ms));
        open--;
        return wrote;
      };
    const started = performance.now();
    turns.enqueue('t1', write('a', 20));
    turns.enqueue('t1', write('gone', 0, false)); // a run that ended meanwhile: no pause after it
    turns.enqueue('t1', write('b', 20));
    turns.enqueue('t2', async () => (log.push('other tenant'), true));
    expect(turns.queued('t1')).toBe(2);
    await new Promise((r) => setTimeout(r, 5));
    expect(log.map((l) => l.split('@')[0])).toEqual(['a', 'other tenant']);
    while (log.length < 4) await new Promise((r) => setTimeout(r, 10));
    expect(log.map((l) => l.split('@')[0])).toEqual(['a', 'other tenant', 'gone', 'b']);
    // b starts after a's 20 ms and 9 x 20 ms of pause.
    expect(Number(log[3].split('@')[1]) - started).toBeGreaterThanOrEqual(190);
  });
});
