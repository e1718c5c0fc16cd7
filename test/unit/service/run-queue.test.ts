import { describe, expect, it } from 'vitest';
import { MAX_STARTING_PER_TENANT, RunQueue, type Job } from '../../../src/service/runtime/scheduler.js';

const job = (i: number, tenantId = 't1'): Job => ({
  id: `con_${i}`,
  tenantId,
  projectId: 'prj',
  kind: 'connector',
  tick: '2026-01-01T00:00:00.000Z',
  claimed: { tick: 0, offset: 0, movedTo: 60_000 },
});

describe('the scheduler run queue', () => {
  it('starts one run a turn of the event loop: a start is a chain of queries that never leaves the microtask queue on SQLite', async () => {
    // Turns of the event loop, counted by a chain of setImmediate that runs alongside the queue.
    let turn = 0;
    let counting = true;
    const count = () => {
      turn++;
      if (counting) setImmediate(count);
    };
    setImmediate(count);
    const startedAt: number[] = [];
    const queue = new RunQueue(async () => void startedAt.push(turn));
    for (let i = 0; i < MAX_STARTING_PER_TENANT; i++) queue.push(job(i));
    await queue.idle();
    counting = false;
    expect(startedAt).toHaveLength(MAX_STARTING_PER_TENANT);
    // Each start in a turn of its own (ten pushed together used to start in one burst).
    expect(new Set(startedAt).size).toBe(MAX_STARTING_PER_TENANT);
  });

  it('still starts at most MAX_STARTING_PER_TENANT of a tenant at a time, the next when one ends', async () => {
    let inFlight = 0;
    let most = 0;
    const queue = new RunQueue(async () => {
      inFlight++;
      most = Math.max(most, inFlight);
      await new Promise((r) => setTimeout(r, 5));
      inFlight--;
    });
    for (let i = 0; i < 3 * MAX_STARTING_PER_TENANT; i++) queue.push(job(i));
    await queue.idle();
    expect(most).toBe(MAX_STARTING_PER_TENANT);
  });
});
