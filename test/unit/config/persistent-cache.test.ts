import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigParseCache, PersistentParseCache, defaultCacheDir, loadConfig, resolveSecrets } from '../../../src/config/index.js';
import { buildDocumentSchema } from '../../../src/config/document-schema.js';
import * as GENERATED from '../../../src/config/generated/document-validator.js';
import { validate } from '../../../src/config/generated/document-validator.js';
import { secretValidatorName } from '../../../src/config/secrets.js';
import { KINDS } from '../../../src/kinds/index.js';
import { schemaAt } from '../../../src/kinds/walk.js';
import { DOCUMENT_VALIDATOR_FILE, renderDocumentValidator } from '../../../src/config/validator-codegen.js';
import { createAjv } from '../../../src/kinds/validator.js';
import { FIXTURES, REPO, lines } from './helpers.js';

const generatedValidate = validate as unknown as ((value: unknown) => boolean) & { errors?: { keyword: string }[] | null };
const work = mkdtempSync(join(tmpdir(), 'dp-persistent-cache-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const entries = (root: string): string[] => {
  const dir = join(root, 'parse-v1');
  try {
    return readdirSync(dir).flatMap((sub) => readdirSync(join(dir, sub)).map((f) => join(dir, sub, f)));
  } catch {
    return [];
  }
};

const comparable = (dir: string, cache?: ConfigParseCache) => {
  const { config, errors } = loadConfig('.', { cwd: dir, cache });
  const documents = config.documents.map(({ descriptor: _d, layout: _l, ...rest }) => rest);
  return { files: config.files, errors: lines(errors), documents };
};

let n = 0;
const fresh = (fixture: string) => {
  const dir = join(work, `repo-${n++}`);
  cpSync(join(FIXTURES, fixture), dir, { recursive: true });
  return dir;
};
const cacheRoot = () => join(work, `cache-${n++}`);

describe('generated document validator', () => {
  it(`${DOCUMENT_VALIDATOR_FILE} matches the document schema (run \`npm run generate\` when this fails)`, () => {
    expect(readFileSync(join(REPO, DOCUMENT_VALIDATOR_FILE), 'utf8')).toBe(renderDocumentValidator());
  });

  it('reports exactly what a schema compiled at run time reports, x-format and formats included', () => {
    const compiled = createAjv().compile(buildDocumentSchema());
    const docs = [
      {
        apiVersion: 'dataplatform/v1',
        kind: 'Connector',
        metadata: { name: 'bell\u0007', project: 'p' },
        spec: { connector_type: 'postgresql', config: { host: 'h', port: 5432, database: 'd' }, schedule: '*/15 * * *' },
      },
      {
        apiVersion: 'dataplatform/v1',
        kind: 'Connector',
        metadata: { name: 'c', project: 'p' },
        spec: { connector_type: 'postgresql', config: { host: 'h', port: 5432, database: 'd' }, schedule: '61 * * * *' },
      },
      {
        apiVersion: 'dataplatform/v1',
        kind: 'Classification',
        metadata: { name: 'pii' },
        spec: { sensitivity: 'high', patterns: ['(a', 'a(?=b)', 'x{2000}'] },
      },
      {
        apiVersion: 'dataplatform/v1',
        kind: 'NotificationChannel',
        metadata: { name: 'hook', project: 'p' },
        spec: { type: 'webhook', config: { url: 'not a uri' } },
      },
      { apiVersion: 'v0', kind: 'Nope', metadata: {} },
    ];
    for (const doc of docs) {
      const a = generatedValidate(doc);
      const b = compiled(doc);
      expect(a).toBe(b);
      expect(generatedValidate.errors).toEqual(compiled.errors);
    }
    // The x-format keyword really runs in the generated code.
    generatedValidate(docs[1]);
    expect(generatedValidate.errors?.some((e: { keyword: string }) => e.keyword === 'x-format')).toBe(true);
  });
});

describe('generated secret field validators', () => {
  it("has one for every kind's secret field, reporting what the field's schema compiled at run time reports", () => {
    const ajv = createAjv();
    const generated = GENERATED as unknown as Record<string, ((v: unknown) => boolean) & { errors?: unknown }>;
    let checked = 0;
    for (const d of KINDS.values())
      for (const path of d.secretPaths) {
        const name = secretValidatorName(d.kind, path);
        expect(generated[name], `${d.kind} ${path.join('.')}`).toBeTypeOf('function');
        const compiled = ajv.compile(schemaAt(d.createSchema, path)!);
        for (const value of ['', 'short', 'a-long-enough-value', 'https://hooks.example.com/x', 'x'.repeat(5000), 42]) {
          expect(generated[name](value), `${name} ${value}`).toBe(compiled(value));
          expect(generated[name].errors ?? null).toEqual(compiled.errors ?? null);
          checked++;
        }
      }
    expect(checked).toBeGreaterThanOrEqual(5 * 6);
  });
});

describe('persistent parse cache', () => {
  it('lives in DPCTL_CACHE_DIR, else $XDG_CACHE_HOME/dpctl, else ~/.cache/dpctl', () => {
    expect(defaultCacheDir({ DPCTL_CACHE_DIR: '/x/y', XDG_CACHE_HOME: '/c' })).toBe('/x/y');
    expect(defaultCacheDir({ XDG_CACHE_HOME: '/c' })).toBe(join('/c', 'dpctl'));
    expect(defaultCacheDir({})).toMatch(/[/\\]\.cache[/\\]dpctl$/);
  });

  it('a second load reads valid files from the cache and gives exactly what a fresh load gives', () => {
    const dir = fresh('valid');
    const root = cacheRoot();
    const first = comparable(dir, new ConfigParseCache({ persistent: new PersistentParseCache(root) }));
    expect(first).toEqual(comparable(dir));
    expect(entries(root).length).toBeGreaterThan(0);
    const second = comparable(dir, new ConfigParseCache({ persistent: new PersistentParseCache(root) }));
    expect(second).toEqual(comparable(dir));
    // Secrets still resolve from the cached documents (paths re-based on the current checkout).
    const { config } = loadConfig('.', { cwd: dir, cache: new ConfigParseCache({ persistent: new PersistentParseCache(root) }) });
    expect(resolveSecrets(config.documents, { env: { OPS_PASSWORD: 'ops-password-1', HOOK_SECRET: 'hook-secret' } }).errors).toEqual([]);
  });

  it('is really used: an entry is read instead of the file (proved with a doctored entry)', () => {
    const dir = fresh('valid');
    const root = cacheRoot();
    loadConfig('.', { cwd: dir, cache: new ConfigParseCache({ persistent: new PersistentParseCache(root) }) });
    for (const file of entries(root)) {
      const entry = JSON.parse(readFileSync(file, 'utf8'));
      for (const doc of entry.documents) if (doc?.kind === 'Project') doc.spec = { ...doc.spec, description: 'from the cache' };
      writeFileSync(file, JSON.stringify(entry));
    }
    const { config } = loadConfig('.', { cwd: dir, cache: new ConfigParseCache({ persistent: new PersistentParseCache(root) }) });
    expect(config.documents.filter((d) => d.yamlKind === 'Project').map((d) => d.body.description)).toContain('from the cache');
    // Without the cache, the file's own text.
    expect(
      loadConfig('.', { cwd: dir })
        .config.documents.filter((d) => d.yamlKind === 'Project')
        .map((d) => d.body.description),
    ).not.toContain('from the cache');
  });

  it('ignores corrupt, truncated, foreign and empty entries, and rewrites them', () => {
    const dir = fresh('valid');
    const root = cacheRoot();
    loadConfig('.', { cwd: dir, cache: new ConfigParseCache({ persistent: new PersistentParseCache(root) }) });
    const expected = comparable(dir);
    const damage = [
      (t: string) => t.slice(0, Math.floor(t.length / 2)),
      () => 'not json',
      () => '',
      () => '{"key":"someone else","documents":[]}',
      () => 'null',
      () => '{"documents":{}}',
    ];
    for (const hurt of damage) {
      for (const file of entries(root)) writeFileSync(file, hurt(readFileSync(file, 'utf8')));
      expect(comparable(dir, new ConfigParseCache({ persistent: new PersistentParseCache(root) }))).toEqual(expected);
    }
    // Rewritten by the last load: whole again.
    for (const file of entries(root)) expect(() => JSON.parse(readFileSync(file, 'utf8'))).not.toThrow();
  });

  it('survives its directory being deleted, or being unwritable', () => {
    const dir = fresh('valid');
    const root = cacheRoot();
    loadConfig('.', { cwd: dir, cache: new ConfigParseCache({ persistent: new PersistentParseCache(root) }) });
    rmSync(root, { recursive: true, force: true });
    expect(comparable(dir, new ConfigParseCache({ persistent: new PersistentParseCache(root) }))).toEqual(comparable(dir));
    const blocked = join(work, `blocked-${n++}`);
    writeFileSync(blocked, 'a file where the cache directory should be');
    expect(comparable(dir, new ConfigParseCache({ persistent: new PersistentParseCache(blocked) }))).toEqual(comparable(dir));
  });

  it('never caches a file with errors: messages are the same with and without the cache, every time', () => {
    for (const fixture of [
      'invalid/syntax',
      'invalid/duplicates',
      'invalid/envelope',
      'invalid/secret-inline',
      'invalid/missing-reference',
      'invalid/dag',
      'invalid/two-files',
      'invalid/undeclared-project',
    ]) {
      const dir = fresh(fixture);
      const root = cacheRoot();
      const expected = comparable(dir);
      expect(expected.errors.length, fixture).toBeGreaterThan(0);
      for (let i = 0; i < 2; i++)
        expect(comparable(dir, new ConfigParseCache({ persistent: new PersistentParseCache(root) })), fixture).toEqual(expected);
    }
  });

  it('keys entries by the package version and the generated validator as well as the text', () => {
    const a = new PersistentParseCache(cacheRoot());
    expect(a.keyOf('x: 1')).toBe(new PersistentParseCache(cacheRoot()).keyOf('x: 1'));
    expect(a.keyOf('x: 1')).not.toBe(a.keyOf('x: 2'));
    const source = readFileSync(join(REPO, 'src', 'config', 'persistent-cache.ts'), 'utf8');
    expect(source).toMatch(/PACKAGE_VERSION/);
    expect(source).toMatch(/DOCUMENT_VALIDATOR_HASH/);
  });

  it('stays within its bound: the oldest entries go first', () => {
    const root = cacheRoot();
    const small = new PersistentParseCache(root, 4096);
    const keys = Array.from({ length: 12 }, (_, i) => small.keyOf(`doc: ${i}`));
    keys.forEach((key, i) => {
      small.write(key, [{ i, pad: 'x'.repeat(500) }]);
      const file = entries(root).find((f) => f.includes(key))!;
      utimesSync(file, new Date(1_000_000 + i * 1000), new Date(1_000_000 + i * 1000));
    });
    small.settle();
    const left = entries(root);
    const total = left.reduce((s, f) => s + statSync(f).size, 0);
    expect(total).toBeLessThanOrEqual(4096);
    expect(small.read(keys[11])).toEqual([{ i: 11, pad: 'x'.repeat(500) }]);
    expect(small.read(keys[0])).toBeUndefined();
  });

  it('does not store values JSON would change (NaN, infinities, -0)', () => {
    const root = cacheRoot();
    const c = new PersistentParseCache(root);
    c.write(c.keyOf('a'), [{ x: Number.NaN }]);
    c.write(c.keyOf('b'), [{ x: -0 }]);
    expect(entries(root)).toEqual([]);
    mkdirSync(root, { recursive: true });
  });
});
