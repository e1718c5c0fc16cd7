import { describe, expect, it } from 'vitest';
import { padToBucket } from '../../../src/service/store/db.js';

describe('padToBucket: SQL lists of any length in a dozen statement texts', () => {
  it('pads to the next power of two by repeating the last item, and leaves an empty list empty', () => {
    expect(padToBucket([])).toEqual([]);
    expect(padToBucket(['a'])).toEqual(['a']);
    expect(padToBucket(['a', 'b', 'c'])).toEqual(['a', 'b', 'c', 'c']);
    expect(padToBucket([1, 2, 3, 4])).toEqual([1, 2, 3, 4]);
    expect(padToBucket([1, 2, 3, 4, 5])).toHaveLength(8);
    const lengths = new Set(Array.from({ length: 2_500 }, (_, n) => padToBucket(Array(n + 1).fill(0)).length));
    expect([...lengths].sort((x, y) => x - y)).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]);
  });
});
