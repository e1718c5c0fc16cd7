import { describe, expect, it } from 'vitest';
import { GroupCommit } from '../../../src/service/runtime/group-commit.js';

/** A write that records its items and waits for the test to let it finish. */
function recordingWrites() {
  const writes: number[][] = [];
  const finish: (() => void)[] = [];
  const commit = new GroupCommit<number>(
    (items) =>
      new Promise<void>((resolve, reject) => {
        writes.push(items);
        finish.push(() => (items.includes(-1) ? reject(new Error(`write of ${items.join(',')} failed`)) : resolve()));
      }),
  );
  const started = async (n: number) => {
    while (writes.length < n) await new Promise((r) => setImmediate(r));
  };
  return { commit, writes, finish, started };
}

describe('GroupCommit', () => {
  it('writes the items handed in during one turn together, and those that come while it writes in the next write', async () => {
    const { commit, writes, finish, started } = recordingWrites();
    const first = [1, 2, 3].map((n) => commit.add(n));
    await started(1);
    const second = [4, 5].map((n) => commit.add(n));
    expect(writes).toEqual([[1, 2, 3]]); // one write at a time: 4 and 5 wait for it
    finish[0]();
    await Promise.all(first);
    await started(2);
    expect(writes).toEqual([
      [1, 2, 3],
      [4, 5],
    ]);
    finish[1]();
    await Promise.all(second);
  });

  it('a failed write rejects its own items only; the next write goes on', async () => {
    const { commit, finish, started } = recordingWrites();
    const failing = [commit.add(-1), commit.add(7)];
    await started(1);
    const later = commit.add(8);
    finish[0]();
    for (const p of failing) await expect(p).rejects.toThrow('write of -1,7 failed');
    await started(2);
    finish[1]();
    await expect(later).resolves.toBeUndefined();
  });
});
