import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BUNDLE_DIR } from '../../../src/distribution/provider-release.js';
import { testStore } from '../../support/service.js';
import { assertFreshBundle } from './harness.js';

/**
 * What Terraform's provider processes load: each compiles the provider chunk at its first call,
 * several times per command. The YAML layer (src/config: the document validator, parsers, caches)
 * was pulled in through the engine's import of the config barrel and made the chunk 1.77 MB
 * instead of 1.17. The entry (what runs before the handshake) held grpc-js (570 KB, ~75 ms of every
 * start) and protobufjs's .proto parser until the provider served gRPC itself (grpc-server.ts)
 * from a descriptor generated at build time.
 */
describe.skipIf(testStore() === 'postgres')('the provider bundle', () => {
  it('holds none of the YAML layer but the layout the diff needs', () => {
    assertFreshBundle();
    const text = readdirSync(BUNDLE_DIR)
      .filter((f) => f.endsWith('.mjs'))
      .map((f) => readFileSync(join(BUNDLE_DIR, f), 'utf8'))
      .join('\n');
    // esbuild names each module it bundles in a comment line.
    const modules = [...text.matchAll(/^\/\/ (src\/\S+|node_modules\/\S+)$/gm)].map((m) => m[1]);
    expect(modules.filter((m) => m.startsWith('src/provider/')).length).toBeGreaterThan(10);
    expect(modules.filter((m) => m.startsWith('src/config/') && m !== 'src/config/layout.ts')).toEqual([]);
    expect(modules.filter((m) => /^node_modules\/(js-yaml|yaml)\//.test(m))).toEqual([]);
  });

  it('serves gRPC without grpc-js, and reads its protocol without a .proto parser', () => {
    assertFreshBundle();
    const modules = readdirSync(BUNDLE_DIR)
      .filter((f) => f.endsWith('.mjs'))
      .flatMap((f) => [...readFileSync(join(BUNDLE_DIR, f), 'utf8').matchAll(/^\/\/ (node_modules\/\S+)$/gm)].map((m) => m[1]));
    expect(modules.some((m) => m.startsWith('node_modules/protobufjs/'))).toBe(true);
    expect(
      modules.filter((m) => /^node_modules\/@grpc\//.test(m) || /^node_modules\/protobufjs\/src\/(parse|tokenize)\.js$/.test(m)),
    ).toEqual([]);
  });
});
