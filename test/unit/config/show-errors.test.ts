import { describe, expect, it } from 'vitest';
import { FOLLOWERS_LISTED, FOLLOWERS_SHOWN, showErrors } from '../../../src/config/errors.js';

describe('dpctl validate: errors that follow from a root cause', () => {
  const root = { text: 'a.yaml:1:1: YAML syntax: x (and N errors that follow from it)', follows: false };
  const follower = (i: number) => ({ text: `  ↳ b.yaml:${i}:1: dangling`, follows: true });

  it('lists them all when few', () => {
    const errors = [
      root,
      ...Array.from({ length: FOLLOWERS_LISTED }, (_, i) => follower(i + 1)),
      { text: 'c.yaml:1:1: other', follows: false },
    ];
    expect(showErrors(errors).trim().split('\n')).toEqual(errors.map((e) => e.text));
  });

  it('shows the first few and a count when many', () => {
    const errors = [root, ...Array.from({ length: 40 }, (_, i) => follower(i + 1))];
    const out = showErrors(errors).trim().split('\n');
    expect(out).toEqual([
      root.text,
      ...errors.slice(1, 1 + FOLLOWERS_SHOWN).map((e) => e.text),
      `  ↳ ... and ${40 - FOLLOWERS_SHOWN} more`,
    ]);
  });
});
