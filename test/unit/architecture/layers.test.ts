/**
 * Imports point one way: cli → controller → engine/provider/cdktf/distribution → client/config →
 * kinds, and the service only reaches down to kinds (it must never need the client side to run).
 * Inside the service, runtime and sign-in code does not reach into route files.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '..', '..', '..', 'src');

/** Layer of each top-level module of src/: a module may import its own layer's or a lower one's. */
const LAYER: Record<string, number> = {
  kinds: 0,
  'version.ts': 0,
  'log-format.ts': 0,
  // Work in steps, run at once or in turns (used by config and engine).
  'steps.ts': 0,
  // Small collection helpers (grouping without copying), for engine and controller.
  'collections.ts': 0,
  // Path helpers (is a real path within a root), for config and the controller's sources.
  'paths.ts': 0,
  // Stop with the npm process that started us (dpctl serve, dpctl controller).
  'parent-watch.ts': 0,
  // Reading a secret file safely (bounded, never a pipe), for config's secretRefs and the client's credential files.
  'secret-file.ts': 0,
  client: 1,
  config: 1,
  engine: 2,
  provider: 2,
  cdktf: 2,
  cdktn: 2,
  distribution: 2,
  controller: 3,
  cli: 4,
};
/**
 * The service is a column of its own beside the client side: it may use only these (collections.ts:
 * plain Map and array helpers that import nothing).
 */
const SERVICE_MAY_IMPORT = new Set(['kinds', 'version.ts', 'log-format.ts', 'collections.ts', 'service']);

/** Within a module: directories whose files must not import the given directory. */
const INNER_RULES: Array<{ from: string; notTo: string }> = [
  { from: 'service/runtime/', notTo: 'service/routes/' },
  { from: 'service/sso/', notTo: 'service/routes/' },
  { from: 'service/store/', notTo: 'service/routes/' },
  { from: 'service/store/', notTo: 'service/auth/' },
];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.(ts|js|mjs)$/.test(name) && !name.endsWith('.d.ts') ? [path] : [];
  });
}

const IMPORT = /(?:^|\s)(?:import|export)\s[^'";]*?from\s+['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g;

/** Every relative import of the tree, as paths relative to src/. */
function imports(): Array<{ file: string; target: string }> {
  const out: Array<{ file: string; target: string }> = [];
  for (const path of sourceFiles(SRC)) {
    const text = readFileSync(path, 'utf8');
    for (const m of text.matchAll(IMPORT)) {
      const target = relative(SRC, resolve(dirname(path), m[1] ?? m[2]));
      if (!target.startsWith('..')) out.push({ file: relative(SRC, path), target });
    }
  }
  return out;
}

const topOf = (path: string) => path.split('/')[0].replace(/\.js$/, '.ts');

/** The import edges that go against the layers, as 'file -> target'. */
export function layerViolations(edges = imports()): string[] {
  const bad: string[] = [];
  for (const { file, target } of edges) {
    const [from, to] = [topOf(file), topOf(target)];
    if (from === to) continue;
    const wrong =
      from === 'service'
        ? !SERVICE_MAY_IMPORT.has(to)
        : to === 'service'
          ? from !== 'cli'
          : LAYER[from] === undefined || LAYER[to] === undefined || LAYER[to] > LAYER[from];
    if (wrong) bad.push(`${file} -> ${target}`);
  }
  for (const { file, target } of edges)
    for (const rule of INNER_RULES) if (file.startsWith(rule.from) && target.startsWith(rule.notTo)) bad.push(`${file} -> ${target}`);
  return bad.sort();
}

/** Cycles between top-level modules of the same layer (a sideways import both ways). */
function moduleCycles(edges = imports()): string[] {
  const pairs = new Set(edges.map((e) => `${topOf(e.file)}>${topOf(e.target)}`));
  return [...pairs]
    .map((p) => p.split('>'))
    .filter(([a, b]) => a < b && pairs.has(`${b}>${a}`))
    .map(([a, b]) => `${a} <-> ${b}`);
}

describe('import direction', () => {
  it('finds the imports of the tree (the check reads real files)', () => {
    const edges = imports();
    expect(edges.length).toBeGreaterThan(500);
    expect(edges).toContainEqual({ file: 'engine/plan.ts', target: 'config/index.js' });
  });

  it('flags an import against the direction', () => {
    expect(layerViolations([{ file: 'kinds/a.ts', target: 'client/b.js' }])).toEqual(['kinds/a.ts -> client/b.js']);
    expect(layerViolations([{ file: 'service/a.ts', target: 'engine/b.js' }])).toEqual(['service/a.ts -> engine/b.js']);
    expect(layerViolations([{ file: 'controller/a.ts', target: 'cli/b.js' }])).toEqual(['controller/a.ts -> cli/b.js']);
    expect(layerViolations([{ file: 'service/runtime/a.ts', target: 'service/routes/b.js' }])).toEqual([
      'service/runtime/a.ts -> service/routes/b.js',
    ]);
    expect(layerViolations([{ file: 'cli/a.ts', target: 'kinds/b.js' }])).toEqual([]);
  });

  it('no module imports against the layers', () => {
    expect(layerViolations()).toEqual([]);
  });

  it('no two top-level modules import each other', () => {
    expect(moduleCycles()).toEqual([]);
  });
});
