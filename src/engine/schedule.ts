import { serviceUnreachable } from '../client/index.js';
import type { ApplyNode } from './apply.js';
import { subjectOfChange } from './plan.js';

export interface ScheduleOptions {
  concurrency: number;
  signal?: AbortSignal;
  progress: (line: string) => void;
}

/**
 * Runs every node whose dependencies are done, at most `concurrency` at a time, as workers free
 * up, in the order of `nodes` among those ready. A node not done (failed, skipped, unsupported)
 * skips what depends on it; an abort, or a failure that says the service is unreachable, skips what
 * has not started; what still waits when nothing runs waits on a cycle and fails.
 *
 * A node is looked at when its last dependency is done, not at every finish: each keeps a count
 * of the dependencies it waits on, and the ready ones wait in a heap of their positions. Scanning
 * every waiting node at each finish took 12.5 s of CPU for an apply of 40,000 new resources, and
 * grew with the square of the apply.
 */
export function schedule(nodes: Map<string, ApplyNode>, run: (node: ApplyNode) => Promise<void>, options: ScheduleOptions): Promise<void> {
  const { progress } = options;
  const all = [...nodes.values()];
  const position = new Map(all.map((n, i) => [n.id, i]));
  const waitingOn = new Map<string, number>();
  const ready = new PositionHeap();
  const pending = new Set(nodes.keys());
  for (const [i, node] of all.entries()) {
    const waits = [...node.deps].filter((d) => nodes.get(d)!.state !== 'done').length;
    waitingOn.set(node.id, waits);
    if (waits === 0) ready.push(i);
  }
  let running = 0;
  /** Set when the service is unreachable: what has not started is skipped, with this message. */
  let stoppedFor: string | undefined;
  return new Promise<void>((resolveAll) => {
    const skipDependents = (node: ApplyNode) => {
      const stack = [...node.dependents];
      while (stack.length) {
        const dn = nodes.get(stack.pop()!)!;
        if (dn.state !== 'pending') continue;
        dn.state = 'skipped';
        dn.message = `skipped: ${subjectOfChange(node.change)} was not ${node.step === 'delete' ? 'deleted' : 'applied'}`;
        progress(`  ${subjectOfChange(dn.change)}: ${dn.message}`);
        pending.delete(dn.id);
        stack.push(...dn.dependents);
      }
    };
    const dependencyDone = (node: ApplyNode) => {
      for (const id of node.dependents) {
        const waits = waitingOn.get(id)! - 1;
        waitingOn.set(id, waits);
        if (waits === 0 && nodes.get(id)!.state === 'pending') ready.push(position.get(id)!);
      }
    };
    const finish = (node: ApplyNode) => {
      running--;
      if (node.state === 'done') dependencyDone(node);
      else skipDependents(node);
      pump();
    };
    const start = (node: ApplyNode) => {
      pending.delete(node.id);
      node.state = 'running';
      running++;
      run(node).then(
        () => {
          if (node.state === 'running') node.state = 'done';
          if (node.state === 'unsupported') progress(`! ${subjectOfChange(node.change)}: ${node.message}`);
          finish(node);
        },
        (err: Error) => {
          node.state = 'failed';
          node.message = err.message;
          progress(`x ${subjectOfChange(node.change)}: failed: ${err.message}`);
          // The client has retried it already: every change started after it would fail the same way,
          // each after its own retries (a user watched 74 identical failures over 100 s).
          if (serviceUnreachable(err) && !stoppedFor) {
            stoppedFor = `not started: the service was unreachable (${err.code}); run apply again once it is back`;
            progress(`! the service is unreachable: no further change is started (${err.code})`);
          }
          finish(node);
        },
      );
    };
    const settleAll = (state: 'skipped' | 'failed', message: string) => {
      for (const id of pending) {
        const node = nodes.get(id)!;
        node.state = state;
        node.message = message;
      }
      pending.clear();
    };
    const pump = () => {
      if (options.signal?.aborted) settleAll('skipped', 'not started: the apply was stopped');
      if (stoppedFor) settleAll('skipped', stoppedFor);
      while (running < options.concurrency && ready.size > 0) {
        const node = all[ready.pop()];
        // Settled meanwhile (an abort): nothing to start.
        if (node.state === 'pending') start(node);
      }
      if (running === 0) {
        // Anything still pending waits on a cycle: report it instead of hanging.
        settleAll('failed', 'dependency cycle');
        resolveAll();
      }
    };
    pump();
  });
}

/** The positions of the ready nodes, smallest first (a binary min-heap). */
class PositionHeap {
  private readonly items: number[] = [];

  get size(): number {
    return this.items.length;
  }

  push(position: number): void {
    const a = this.items;
    a.push(position);
    for (let i = a.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      if (a[parent] <= a[i]) break;
      [a[parent], a[i]] = [a[i], a[parent]];
      i = parent;
    }
  }

  pop(): number {
    const a = this.items;
    const top = a[0];
    const last = a.pop()!;
    if (a.length === 0) return top;
    a[0] = last;
    for (let i = 0; ;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let least = i;
      if (left < a.length && a[left] < a[least]) least = left;
      if (right < a.length && a[right] < a[least]) least = right;
      if (least === i) break;
      [a[least], a[i]] = [a[i], a[least]];
      i = least;
    }
    return top;
  }
}
