import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, loadConfigInTurns, type LoadResult } from '../../../src/config/index.js';
import { FIXTURES, lines } from './helpers.js';
import { turnsDuring } from '../../support/event-loop.js';

/**
 * The controller loads a revision in turns (loadConfigInTurns), so that it answers /healthz and
 * webhooks meanwhile: a first load of 101,000 documents in one go held its event loop for 13.8 s.
 * The result must be exactly loadConfig's.
 */
const work = mkdtempSync(join(tmpdir(), 'dp-load-turns-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const comparable = ({ config, errors }: LoadResult) => ({
  files: config.files,
  errors: lines(errors),
  documents: config.documents.map(({ descriptor: _d, layout: _l, ...rest }) => rest),
});

/** `files` files of `perFile` connectors each, in one project; `broken` adds a reference to a missing connector. */
function repository(name: string, files: number, perFile: number, broken = false): string {
  const dir = join(work, name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'project.yaml'), 'apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: shop\nspec: {}\n');
  for (let f = 0; f < files; f++) {
    const docs = Array.from(
      { length: perFile },
      (_, i) => `apiVersion: dataplatform/v1
kind: Connector
metadata:
  name: c-${f}-${i}
  project: shop
spec:
  connector_type: postgresql
  config: { host: db-${i}.internal, port: 5432, database: shop }
  schedule: "0 0 1 1 *"
`,
    );
    if (broken && f === files - 1)
      docs.push(`apiVersion: dataplatform/v1
kind: Pipeline
metadata:
  name: p-${f}
  project: shop
spec:
  steps:
    - { name: load, type: connector_sync, connector: missing-one }
`);
    writeFileSync(join(dir, `f${String(f).padStart(3, '0')}.yaml`), docs.join('---\n'));
  }
  return dir;
}

describe('loadConfigInTurns', () => {
  it('gives exactly what loadConfig gives, for every fixture, errors included', async () => {
    for (const fixture of readdirSync(FIXTURES)) {
      const dir = join(FIXTURES, fixture);
      expect(comparable(await loadConfigInTurns('.', { cwd: dir })), fixture).toEqual(comparable(loadConfig('.', { cwd: dir })));
    }
  });

  it('lets the event loop turn while it loads many files, where loadConfig holds it throughout', async () => {
    const dir = repository('many', 40, 50, true);
    const inTurns = await turnsDuring(() => loadConfigInTurns('.', { cwd: dir }));
    const inOneGo = await turnsDuring(async () => loadConfig('.', { cwd: dir }));
    expect(inOneGo.turns).toBe(0);
    expect(inTurns.turns).toBeGreaterThan(1);
    expect(comparable(inTurns.result)).toEqual(comparable(inOneGo.result));
    expect(inTurns.result.errors.map((e) => e.code)).toEqual(['unresolved_reference']);
  });

  it('two loads in turns at once give what each gives alone', async () => {
    const a = repository('a', 20, 30);
    const b = repository('b', 25, 20, true);
    const both = await Promise.all([loadConfigInTurns('.', { cwd: a }), loadConfigInTurns('.', { cwd: b })]);
    expect(both.map(comparable)).toEqual([a, b].map((dir) => comparable(loadConfig('.', { cwd: dir }))));
  });
});
