import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GENERATED_DIR, renderCdktfBindings } from '../../scripts/generate-cdktf.js';
import { RESOURCE_CONSTRUCTS } from '../../src/cdktf/index.js';
import { resourceSpecs } from '../../src/provider/schema.js';

describe('generated cdktf bindings', () => {
  it('are up to date with the schemas (run: node --import tsx scripts/generate-cdktf.ts)', () => {
    const expected = renderCdktfBindings();
    const onDisk = readdirSync(GENERATED_DIR)
      .filter((f) => f.endsWith('.ts'))
      .sort();
    expect(onDisk).toEqual([...expected.keys()].sort());
    for (const [name, text] of expected) expect(readFileSync(join(GENERATED_DIR, name), 'utf8'), `${name} is stale`).toBe(text);
  });

  it('have one construct per resource the provider serves', () => {
    expect(Object.keys(RESOURCE_CONSTRUCTS).sort()).toEqual([...resourceSpecs().keys()].sort());
    for (const [type, cls] of Object.entries(RESOURCE_CONSTRUCTS)) expect(cls.tfResourceType).toBe(type);
  });

  it('pin the provider version to the package version', () => {
    const { version } = JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', 'package.json'), 'utf8'));
    expect(readFileSync(join(GENERATED_DIR, 'provider.ts'), 'utf8')).toContain(`providerVersion: '${version}'`);
  });
});
