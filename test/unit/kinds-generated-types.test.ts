import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { GENERATED_TYPES_PATH, generateKindTypes } from '../../src/kinds/codegen.js';
import { writableKinds } from '../../src/kinds/index.js';
import { WRITABLE_KIND_NAMES } from '../../src/client/index.js';

describe('generated kind types', () => {
  it('src/kinds/generated/kinds.ts matches the kind schemas (run `npm run generate` when this fails)', () => {
    expect(readFileSync(GENERATED_TYPES_PATH, 'utf8')).toBe(generateKindTypes());
  });

  it('name every writable kind', () => {
    expect([...WRITABLE_KIND_NAMES].sort()).toEqual(
      writableKinds()
        .map((d) => d.kind)
        .sort(),
    );
  });
});
