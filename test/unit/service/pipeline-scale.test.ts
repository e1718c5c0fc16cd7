import { describe, expect, it } from 'vitest';
import { checkDag, topologicalOrder, type DagNode } from '../../../src/kinds/dag.js';
import { kind } from '../../../src/kinds/index.js';
import { capProblems, itemCaps } from '../../../src/service/behaviours/item-caps.js';

/** A chain declared last-first: s0 <- s1 <- ... <- s(n-1). */
const chain = (n: number): DagNode[] =>
  Array.from({ length: n }, (_, k) => ({ name: `s${n - 1 - k}`, dependsOn: n - 1 - k ? [`s${n - 2 - k}`] : [] }));

describe('DAG checks scale linearly and never recurse', () => {
  it('a 100,000-step chain is checked and ordered (a recursive walk overflowed the stack)', () => {
    const nodes = chain(100_000);
    expect(checkDag(nodes)).toBeNull();
    const order = topologicalOrder(nodes);
    expect(order[0]).toBe('s0');
    expect(order.at(-1)).toBe('s99999');
  });

  it('still names the cycle, the duplicate and the missing dependency', () => {
    expect(
      checkDag([
        { name: 'a', dependsOn: ['c'] },
        { name: 'b', dependsOn: ['a'] },
        { name: 'c', dependsOn: ['b'] },
      ]),
    ).toEqual({ type: 'cycle', index: 0, name: 'a', cycle: ['a', 'c', 'b', 'a'] });
    expect(
      checkDag([
        { name: 'a', dependsOn: [] },
        { name: 'a', dependsOn: [] },
      ]),
    ).toEqual({ type: 'duplicate', index: 1, name: 'a' });
    expect(checkDag([{ name: 'a', dependsOn: ['x'] }])).toEqual({ type: 'missing', index: 0, name: 'a', dependency: 'x' });
    expect(
      topologicalOrder([
        { name: 'c', dependsOn: ['a', 'b'] },
        { name: 'b', dependsOn: [] },
        { name: 'a', dependsOn: [] },
      ]),
    ).toEqual(['a', 'b', 'c']);
  });
});

describe('item caps (x-max-items)', () => {
  it('come from the kind schemas', () => {
    expect(itemCaps(kind('pipeline').schema)).toEqual([
      { path: ['steps'], max: 500 },
      { path: ['steps', '*', 'depends_on'], max: 50 },
    ]);
    expect(itemCaps(kind('dbt_project').schema)).toEqual([
      { path: ['models'], max: 1000 },
      { path: ['models', '*', 'depends_on'], max: 50 },
      { path: ['models', '*', 'sources'], max: 100 },
    ]);
    expect(itemCaps(kind('alert_rule').schema)).toEqual([{ path: ['channel_ids'], max: 50 }]);
    expect(itemCaps(kind('escalation_policy').schema)).toEqual([
      { path: ['steps'], max: 50 },
      { path: ['steps', '*', 'channel_ids'], max: 50 },
    ]);
  });

  it('name each list over its cap, and skip what is inside one', () => {
    const caps = itemCaps(kind('escalation_policy').schema);
    const step = (n: number) => ({ delay_minutes: 0, channel_ids: Array.from({ length: n }, (_, i) => `c${i}`) });
    expect(capProblems(caps, { steps: [step(50), step(51)] })).toEqual([
      { field: 'steps[1].channel_ids', message: 'has 51 items; at most 50 are allowed' },
    ]);
    expect(capProblems(caps, { steps: Array.from({ length: 51 }, () => step(99)) })).toEqual([
      { field: 'steps', message: 'has 51 items; at most 50 are allowed' },
    ]);
    expect(capProblems(caps, { steps: [step(50)] })).toEqual([]);
  });
});
