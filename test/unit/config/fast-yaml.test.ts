import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Document, isScalar, parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { fastParseDocuments, YAML_CORE_SCALARS } from '../../../src/config/fast-yaml.js';

/**
 * The fast YAML path (js-yaml events) must give the very values the `yaml` package gives, or
 * step aside (undefined) so that the file is read with `yaml`: never a different value, and
 * never a value where `yaml` reports an error.
 */
const reference = (text: string): unknown[] | 'error' => {
  const docs = parseAllDocuments(text, { merge: true });
  return docs.some((d) => d.errors.length) ? 'error' : docs.map((d) => d.toJS({ maxAliasCount: 1000 }));
};

// -0, NaN and infinities survive the comparison (JSON would turn them into 0 or null).
const exact = (v: unknown): string =>
  JSON.stringify(v, (_k, x) =>
    typeof x === 'number' && (!Number.isFinite(x) || Object.is(x, -0)) ? `number:${Object.is(x, -0) ? '-0' : x}` : x,
  );

const CASES: Record<string, string> = {
  'one document': 'a: 1',
  'trailing separator': 'a: 1\n---\n',
  'comment only': '# c\n',
  empty: '',
  'empty documents': '---\na: 1\n---\n# x\n---\n',
  'nulls and booleans': 'a: ~\nb: null\nc: Null\nd: NULL\ne:\nf: true\ng: True\nh: TRUE\ni: yes\nj: on\nk: off\n',
  numbers:
    'n: [0o17, 017, 0x1F, 0b11, +12, -0, 1_000, 1.5, 1., .5, 1e3, 1.5E-2, .inf, -.Inf, .NaN, 12:30, 2001-12-14, 0.1.2, "1", \'1\', 9007199254740993, 1e400, -.5, 0o, 0x, +, .]\n',
  'block scalars':
    's: |\n  line1\n   line2\n\n  line3\nt: >\n  folded\n  text\n\n   more\n  end\nu: |-\n  x\nv: >+\n  y\n\nw: x\nz: |2\n   x\n  y\n',
  'flow and quoted': "p: plain\n  multi line\n\n  para\nq: \"dq \\t \\u00e9 \\x41\\\n  cont \\/\"\nr: 'sq ''q'' \n  next'\n",
  comments: 'a: b#c\nd: e # comment\nf: "#x"\n# end\n',
  'BOM and CRLF': '\ufeffa: 1\r\nb: [1, 2]\r\nc: |\r\n  x\r\n  y\r\n',
  'proto key': '__proto__: {x: 1}\ny: 2\n',
  collections: 'a: {b: c, d: [e, f]}\ng:\n- h\n- i: j\n  k: l\nm: { a: 1, b: }\nn:    \n  - x\n  -\n  - "y"\n',
  'quoted keys': '"a": 1\n\'b\': 2\n"1": 3\n"~": 4\n',
  'empty strings': 'x: \'\'\ny: ""\n',
  'colons and dashes': 'x: ":"\ny: a:b\nz: a :b\nw: -\nv: -x\n',
  'document end marker': 'a: 1\n...\n---\nb: 2\n',
  'a long line': `long: ${'x'.repeat(5000)}\n`,
  'cron and globs': 'schedule: "*/15 * * * *"\nglob: a*b\npattern: ^[a-z]+$\n',
  unicode: 'name: café ☕ 名前\nemoji: "\\U0001F600"\n',
  // Outside the fast path's subset, or errors: must come back undefined (then read by `yaml`).
  'duplicate keys': 'a: 1\na: 2\n',
  anchors: 'a: &x 1\nb: *x\n',
  tags: 'a: !!str 1\nb: !local 1\n',
  merge: 'base: &b {a: 1}\nx:\n  <<: *b\n',
  'merge key without anchors': '<<: {a: 1}\n',
  'explicit key': '? a\n: b\n',
  'number key': '1: a\n',
  'bool key': 'true: x\n',
  'null key': '~: y\nnull: z\n',
  'empty key': ': y\n',
  'collection key': '[a]: b\n',
  directive: '%YAML 1.2\n---\na: 1\n',
  'tab indentation': 'a:\n\tb: 1\n',
  'nested compact map': 'a: b: c\n',
  unterminated: 'a: "unterminated\n',
  'unclosed flow': 'a: [1, 2\n',
  'mixed block': '- a\nb: c\n',
  'bad indent': 'key: value\n  bad: indent\n',
  'reserved indicator': 'x: @foo\n',
  backtick: 'x: `y\n',
  'sequence in map value on one line': 'x: - y\n',
  'flow hole': 'x: [a, , b]\n',
  'seq then map': 'a:\n  - b\n  c: d\n',
};

const repoYaml = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.ya?ml$/.test(e.name))
    .map((e) => join(e.parentPath, e.name));

describe('fast YAML path', () => {
  it("writes out the yaml package's core schema scalars exactly (so that it does not load yaml): same tests, in order, same values", () => {
    const tags = new Document(null, { version: '1.2' }).schema.tags.filter((t) => t.test && t.resolve);
    expect(YAML_CORE_SCALARS.map((t) => t.test.source)).toEqual(tags.map((t) => t.test!.source));
    const samples = [
      '',
      '~',
      'null',
      'Null',
      'NULL',
      'true',
      'True',
      'TRUE',
      'false',
      'False',
      'FALSE',
      '0o17',
      '0o0',
      '0',
      '+12',
      '-0',
      '007',
      '9007199254740993',
      '0x1F',
      '0xff',
      '.inf',
      '-.Inf',
      '+.INF',
      '.nan',
      '.NaN',
      '.NAN',
      '1e3',
      '-1.5E-2',
      '.5e1',
      '1.e2',
      '1.',
      '1.50',
      '-.5',
      '+0.0',
    ];
    for (const sample of samples) {
      const tag = tags.find((t) => t.test!.test(sample))!;
      const mine = YAML_CORE_SCALARS.find((t) => t.test.test(sample))!;
      expect(mine.test.source, sample).toBe(tag.test!.source);
      const value = (tag.resolve as (s: string, onError: () => void, options: object) => unknown)(sample, () => undefined, {});
      expect(exact(mine.resolve(sample)), sample).toBe(exact(isScalar(value) ? value.value : value));
    }
  });

  it.each(Object.entries(CASES))('%s: same values as the yaml package, or steps aside', (_name, text) => {
    const ref = reference(text);
    const fast = fastParseDocuments(text);
    if (fast === undefined) return;
    expect(ref).not.toBe('error');
    expect(exact(fast)).toBe(exact(ref));
  });

  it('takes the common cases (so that it is a fast path at all)', () => {
    for (const name of [
      'one document',
      'empty documents',
      'nulls and booleans',
      'numbers',
      'block scalars',
      'flow and quoted',
      'collections',
      'BOM and CRLF',
      'cron and globs',
      'document end marker',
    ]) {
      expect(fastParseDocuments(CASES[name]), name).toBeDefined();
    }
    for (const name of [
      'duplicate keys',
      'anchors',
      'tags',
      'merge',
      'merge key without anchors',
      'number key',
      'null key',
      'empty key',
      'collection key',
      'directive',
      'unterminated',
    ]) {
      expect(fastParseDocuments(CASES[name]), name).toBeUndefined();
    }
  });

  it('agrees with the yaml package on every YAML file of the repository', () => {
    const root = join(import.meta.dirname, '..', '..', '..');
    const files = [...repoYaml(join(root, 'examples')), ...repoYaml(join(root, 'test', 'fixtures')), ...repoYaml(join(root, 'controller'))];
    expect(files.length).toBeGreaterThan(10);
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      const fast = fastParseDocuments(text);
      if (fast === undefined) continue;
      expect(exact(fast), file).toBe(exact(reference(text)));
    }
  });
});
