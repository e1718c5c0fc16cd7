import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigParseCache, loadConfig, PersistentParseCache } from '../../../src/config/index.js';

/** `memory: false`: a command that loads once keeps parsed files on disk only, not in the cache object as well. */
const root = mkdtempSync(join(tmpdir(), 'dp-parse-cache-memory-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('ConfigParseCache with memory: false', () => {
  it('keeps nothing in memory, and loads the same documents from the disk cache', () => {
    const dir = join(root, 'cfg');
    const cacheDir = join(root, 'cache');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'p.yaml'),
      'apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: p1\n  labels: { team: data }\nspec:\n  description: one\n',
    );
    const plain = loadConfig('.', { cwd: dir });
    const first = new ConfigParseCache({ persistent: new PersistentParseCache(cacheDir), memory: false });
    const a = loadConfig('.', { cwd: dir, cache: first });
    expect(first.size).toBe(0);
    const second = new ConfigParseCache({ persistent: new PersistentParseCache(cacheDir), memory: false });
    const b = loadConfig('.', { cwd: dir, cache: second });
    expect(second.size).toBe(0);
    for (const r of [a, b]) {
      expect(r.errors).toEqual([]);
      expect(r.config.documents.map((d) => ({ body: d.body, labels: d.labels, name: d.name, location: d.location }))).toEqual(
        plain.config.documents.map((d) => ({ body: d.body, labels: d.labels, name: d.name, location: d.location })),
      );
    }
    // The default keeps them, for the controller's next load.
    const kept = new ConfigParseCache({ persistent: new PersistentParseCache(cacheDir) });
    loadConfig('.', { cwd: dir, cache: kept });
    expect(kept.size).toBe(1);
  });
});
