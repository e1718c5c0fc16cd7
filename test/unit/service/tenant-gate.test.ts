import { describe, expect, it } from 'vitest';
import { TenantGate } from '../../../src/service/runtime/tenant-gate.js';
import { ApiError } from '../../../src/service/errors.js';

/** A task that runs until released, recording when it started. */
function task(log: string[], name: string) {
  let release!: () => void;
  const done = new Promise<void>((resolve) => (release = resolve));
  return { run: async () => (log.push(`start ${name}`), await done, log.push(`end ${name}`), name), release };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('TenantGate', () => {
  it("runs one task per tenant at a time, in arrival order, and other tenants' tasks beside them", async () => {
    const gate = new TenantGate('heavy reads', 1, 4);
    const log: string[] = [];
    const [a1, a2, a3, b1] = ['a1', 'a2', 'a3', 'b1'].map((n) => task(log, n));
    const results = [gate.run('a', a1.run), gate.run('a', a2.run), gate.run('a', a3.run), gate.run('b', b1.run)];
    await turn();
    expect(log).toEqual(['start a1', 'start b1']);
    a1.release();
    await turn();
    expect(log).toEqual(['start a1', 'start b1', 'end a1', 'start a2']);
    a2.release();
    a3.release();
    b1.release();
    expect(await Promise.all(results)).toEqual(['a1', 'a2', 'a3', 'b1']);
    // a3 started only once a2 had ended.
    expect(log.indexOf('start a3')).toBeGreaterThan(log.indexOf('end a2'));
  });

  it('refuses with 429 and Retry-After past the tasks that may wait, and takes tasks again once they end', async () => {
    const gate = new TenantGate('heavy reads', 1, 1);
    const log: string[] = [];
    const [first, second] = [task(log, 'first'), task(log, 'second')];
    const running = [gate.run('a', first.run), gate.run('a', second.run)];
    const refused = await gate.run('a', async () => 'third').catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused).toMatchObject({ code: 'rate_limited', status: 429, headers: { 'Retry-After': '1' } });
    expect((refused as Error).message).toBe('Too many heavy reads of this tenant at once (1 running, 1 waiting); retry when one has ended');
    first.release();
    second.release();
    await Promise.all(running);
    expect(await gate.run('a', async () => 'again')).toBe('again');
  });

  it('gives the slot back when a task fails', async () => {
    const gate = new TenantGate('heavy reads', 1, 0);
    await expect(gate.run('a', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await gate.run('a', async () => 'next')).toBe('next');
  });
});
