import { afterAll, describe, expect, it } from 'vitest';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigParseCache, loadConfig, resolveSecrets } from '../../../src/config/index.js';
import { FIXTURES, lines } from './helpers.js';

/**
 * The controller loads every revision through one ConfigParseCache: unchanged files must come
 * back exactly as a fresh parse would give them (errors included), from wherever the new
 * checkout is, and a changed file must be parsed again.
 */
const work = mkdtempSync(join(tmpdir(), 'dp-parse-cache-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A checkout of the valid fixture (one document per kind, a secret read from a file) plus a second file. */
function checkout(name: string, connectorSchedule = '*/15 * * * *'): string {
  const dir = join(work, name);
  cpSync(join(FIXTURES, 'valid'), dir, { recursive: true });
  writeFileSync(
    join(dir, 'extra.yaml'),
    `apiVersion: dataplatform/v1
kind: Connector
metadata:
  name: extra-db
  project: shop
spec:
  connector_type: postgresql
  config: { host: extra.internal, port: 5432, database: extra }
  schedule: "${connectorSchedule}"
`,
  );
  return dir;
}

const env = { OPS_PASSWORD: 'ops-password-1', HOOK_SECRET: 'hook-secret' };
const comparable = (dir: string, cache?: ConfigParseCache) => {
  const { config, errors } = loadConfig('.', { cwd: dir, cache });
  return { files: config.files, errors: lines(errors), documents: config.documents.map(({ descriptor: _d, layout: _l, ...rest }) => rest) };
};

describe('ConfigParseCache', () => {
  it('gives the same documents as a fresh load, and reuses the parsed documents while the files are unchanged', () => {
    const dir = checkout('same');
    const cache = new ConfigParseCache();
    const first = loadConfig('.', { cwd: dir, cache });
    const second = loadConfig('.', { cwd: dir, cache });
    expect(comparable(dir, cache)).toEqual(comparable(dir));
    expect(second.config.documents.length).toBe(first.config.documents.length);
    // Reused, not re-parsed: the very same objects.
    second.config.documents.forEach((doc, i) => expect(doc).toBe(first.config.documents[i]));
    expect(cache.size).toBe(2);
  });

  it('in a new checkout, parses only the changed file and re-bases the others (secrets files are read from the new checkout)', () => {
    const cache = new ConfigParseCache();
    const before = checkout('rev-1');
    const old = loadConfig('.', { cwd: before, cache }).config.documents;
    const after = checkout('rev-2', '5 * * * *');
    writeFileSync(join(after, 'secrets', 'db-password.txt'), 'rotated-in-rev-2\n');
    const { config, errors } = loadConfig('.', { cwd: after, cache });
    expect(lines(errors)).toEqual([]);
    expect(comparable(after, cache)).toEqual(comparable(after));

    const extra = config.documents.find((d) => d.name === 'extra-db')!;
    expect(extra.body.schedule).toBe('5 * * * *');
    expect(old.find((d) => d.name === 'extra-db')!.body.schedule).toBe('*/15 * * * *');
    const connector = config.documents.find((d) => d.name === 'orders-db')!;
    expect(connector.source.absolutePath).toBe(join(after, 'platform.yaml'));
    expect(connector.secrets[0].baseDir).toBe(after);
    // The unchanged file was not parsed again: the re-based document shares its parsed body.
    expect(connector.body).toBe(old.find((d) => d.name === 'orders-db')!.body);
    const { secrets, errors: secretErrors } = resolveSecrets(config.documents, { env });
    expect(lines(secretErrors)).toEqual([]);
    expect(secrets.get(connector, 'credentials.password')).toBe('rotated-in-rev-2');
  });

  it('re-bases a new checkout once: the next loads of that checkout get the very same documents', () => {
    const cache = new ConfigParseCache();
    loadConfig('.', { cwd: checkout('once-1'), cache });
    const dir = checkout('once-2', '5 * * * *');
    const first = loadConfig('.', { cwd: dir, cache }).config.documents;
    const again = loadConfig('.', { cwd: dir, cache }).config.documents;
    expect(again.length).toBe(first.length);
    again.forEach((doc, i) => expect(doc).toBe(first[i]));
    expect(first.find((d) => d.name === 'orders-db')!.source.absolutePath).toBe(join(dir, 'platform.yaml'));
    expect(comparable(dir, cache)).toEqual(comparable(dir));
  });

  it('reports the same errors from the cache as from a fresh parse', () => {
    const cache = new ConfigParseCache();
    for (const fixture of ['syntax', 'undeclared-project', 'duplicates', 'missing-reference']) {
      const dir = join(FIXTURES, 'invalid', fixture);
      const fresh = lines(loadConfig('.', { cwd: dir }).errors);
      expect(fresh.length, fixture).toBeGreaterThan(0);
      expect(lines(loadConfig('.', { cwd: dir, cache }).errors), fixture).toEqual(fresh);
      expect(lines(loadConfig('.', { cwd: dir, cache }).errors), fixture).toEqual(fresh);
    }
  });

  it('forgets files no load used in the last two loads', () => {
    const cache = new ConfigParseCache();
    const dir = checkout('evict');
    loadConfig('.', { cwd: dir, cache });
    expect(cache.size).toBe(2);
    const text = readFileSync(join(dir, 'extra.yaml'), 'utf8');
    writeFileSync(join(dir, 'extra.yaml'), text.replace('extra.internal', 'extra-2.internal'));
    loadConfig('.', { cwd: dir, cache }); // both versions of extra.yaml are kept: the previous revision may still be in force
    expect(cache.size).toBe(3);
    loadConfig('.', { cwd: dir, cache });
    loadConfig('.', { cwd: dir, cache });
    expect(cache.size).toBe(2);
  });
});
