import { describe, expect, it } from 'vitest';
import { Runtime } from '../../../src/service/runtime/runtime.js';
import type { ServiceContext } from '../../../src/service/context.js';

/** A context with just what start() and stop() use: the store's dialect and its meta writes. */
const fakeContext = (dialect: 'sqlite' | 'postgres') =>
  ({ db: { dialect, run: async () => ({ changes: 1 }) }, options: { clock: () => 0, timeScale: 1 } }) as unknown as ServiceContext;

describe('the runtime sweeps for abandoned runs with the recovery it is given', () => {
  it('sweeps nothing before start, then at start and on demand with that recovery', async () => {
    const calls: Array<[Runtime, boolean]> = [];
    const rt = new Runtime(fakeContext('sqlite'));
    await rt.sweep(false);
    expect(calls).toEqual([]);
    await rt.start(async (runtime, everyOtherInstanceIsDead) => void calls.push([runtime, everyOtherInstanceIsDead]));
    await rt.sweep(false);
    await rt.stop();
    expect(calls).toEqual([
      [rt, true],
      [rt, false],
    ]);
  });

  it('at start on PostgreSQL presumes only silent instances dead (replicas share the store)', async () => {
    const seen: boolean[] = [];
    const rt = new Runtime(fakeContext('postgres'));
    await rt.start(async (_rt, everyOtherInstanceIsDead) => void seen.push(everyOtherInstanceIsDead));
    await rt.stop();
    expect(seen).toEqual([false]);
  });
});
