import { describe, expect, it } from 'vitest';
import type { LeaderElector } from '../../../src/controller/leader/types.js';
import { ControllerLoop } from '../../../src/controller/loop.js';
import type { SuspensionStore } from '../../../src/controller/suspension.js';
import { SuspendSwitch } from '../../../src/controller/suspend-switch.js';
import { memoryLogger } from './fixtures.js';

/** The loop with a fake election and a fake run: when runs happen, and why (no service, no timers elapse: the interval is an hour). */

/** Leadership granted on the first acquire; a later acquire waits until the loop stops. */
function fakeElector() {
  let leading = false;
  let lost: (() => void) | undefined;
  let acquires = 0;
  const elector: LeaderElector = {
    description: 'fake',
    identity: 'me',
    acquire: async (signal) => {
      if (++acquires > 1)
        await new Promise<void>((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
      leading = true;
    },
    isLeader: () => leading,
    onLost: (listener) => (lost = listener),
    release: async () => {},
    leaderUrl: async () => 'http://leader:9090',
  };
  return {
    elector,
    acquires: () => acquires,
    lose: () => {
      leading = false;
      lost?.();
    },
  };
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 5));

async function until(check: () => boolean) {
  for (let i = 0; i < 400 && !check(); i++) await tick();
  expect(check()).toBe(true);
}

function setup(o: { suspended?: boolean; store?: SuspensionStore; reconcile?: (signal: AbortSignal) => Promise<void> } = {}) {
  const fake = fakeElector();
  const log = memoryLogger();
  const runs: string[] = [];
  const published: Array<boolean | undefined> = [];
  const suspension = new SuspendSwitch(o.suspended ?? false, o.store, log);
  const loop = new ControllerLoop({
    elector: fake.elector,
    log,
    intervalMs: 3_600_000,
    suspension,
    reconcile: async (trigger, signal) => {
      runs.push(trigger);
      await o.reconcile?.(signal);
    },
    planned: () => runs.length > 0,
    lastResult: () => undefined,
    publish: (suspended) => published.push(suspended),
  });
  return { ...fake, log, runs, published, suspension, loop };
}

describe('ControllerLoop', () => {
  it('leads and runs at once, then sleeps until a trigger wakes it; stop ends the loop', async () => {
    const t = setup();
    expect(t.loop.ready()).toBe(true); // a standby is ready while it is not stopping
    t.loop.start();
    await until(() => t.runs.length === 1);
    expect([t.runs, t.loop.leader, t.loop.ready(), t.published]).toEqual([['start'], true, true, [undefined]]);
    t.loop.trigger('webhook (push)');
    await until(() => t.runs.length === 2);
    t.loop.serverHooks().trigger('reconcile');
    await until(() => t.runs.length === 3);
    expect(t.runs).toEqual(['start', 'webhook (push)', 'reconcile']);
    await t.loop.stop();
    expect([t.loop.leader, t.loop.ready()]).toEqual([false, false]);
    expect(t.published).toEqual([undefined, undefined]);
  });

  it('suspended, it runs nothing; resume publishes the change and runs at once', async () => {
    const t = setup({ suspended: true });
    t.loop.start();
    await until(() => t.loop.leader);
    await tick();
    expect(t.runs).toEqual([]);
    t.loop.resume();
    await until(() => t.runs.length === 1);
    expect(t.runs).toEqual(['resume']);
    expect(t.published).toEqual([undefined, false]);
    t.loop.suspend();
    t.loop.suspend(); // unchanged: not published again
    expect(t.published).toEqual([undefined, false, true]);
    await t.loop.stop();
  });

  it('losing leadership aborts the run in flight and stops reconciling until leadership comes back', async () => {
    let aborted = false;
    const t = setup({
      reconcile: (signal) =>
        new Promise<void>((resolve) =>
          signal.addEventListener('abort', () => {
            aborted = true;
            resolve();
          }),
        ),
    });
    t.loop.start();
    await until(() => t.loop.running);
    t.lose();
    await until(() => t.acquires() === 2);
    expect([aborted, t.loop.leader, t.loop.running, t.runs]).toEqual([true, false, false, ['start']]);
    expect(t.log.lines.map((l) => l.message)).toContain('leadership lost: stopping reconciling (changes in flight finish)');
    await t.loop.stop();
  });

  it('takes a stored suspension on start, and relays control to the leader while on standby', async () => {
    const store: SuspensionStore = { description: 'memory', load: async () => true, save: async () => {} };
    const t = setup({ store });
    await t.loop.loadSuspension('start');
    expect([t.suspension.value, t.published]).toEqual([true, [undefined]]);
    const hooks = t.loop.serverHooks();
    expect(hooks.relay?.isLeader()).toBe(false);
    expect(await hooks.relay?.leaderUrl()).toBe('http://leader:9090');
  });
});
