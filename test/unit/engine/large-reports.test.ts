import { describe, expect, it } from 'vitest';
import { maxOf, pushAll } from '../../../src/collections.js';
import { renderDrift, type DriftEntry } from '../../../src/engine/index.js';

/**
 * Reports of a large tenant: `Math.max(...widths)` and `push(...items)` pass every item as an
 * argument, and past about 120,000 of them V8 throws "Maximum call stack size exceeded".
 */
describe('reports and lists past the argument limit', () => {
  it('drift text of 300,000 unmanaged resources renders (it threw a RangeError)', () => {
    const entries: DriftEntry[] = Array.from({ length: 300_000 }, (_, i) => ({
      type: 'unmanaged',
      kind: 'connector',
      yamlKind: 'Connector',
      project: 'big',
      name: `c${i}`,
      detail: 'not in the config',
      changes: [],
    }));
    const lines = renderDrift(entries).split('\n');
    expect(lines[0]).toBe('DRIFT      KIND       PROJECT  NAME     DETAIL');
    expect(lines[300_000]).toBe('unmanaged  Connector  big      c299999  not in the config');
  });

  it('pushAll and maxOf take any number of items', () => {
    const many = Array.from({ length: 500_000 }, (_, i) => i);
    expect(() => Math.max(...many)).toThrow(RangeError);
    const target = [-1];
    pushAll(target, many);
    expect(target).toHaveLength(500_001);
    expect(target.at(-1)).toBe(499_999);
    expect(maxOf(many)).toBe(499_999);
    expect(maxOf([])).toBe(0);
  });
});
