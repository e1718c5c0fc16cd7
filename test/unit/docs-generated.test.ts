/**
 * The reference pages under docs/ (scripts/generate-docs.ts): up to date with the model, in
 * agreement with the schema the provider serves, and with examples that work: the YAML passes
 * `dpctl validate --check-secrets`, the HCL sets only what the provider schema has and passes the
 * provider's own config validation, the cdktf TypeScript type-checks against the construct library.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { parse as parseHcl } from '@cdktf/hcl2json';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';
import { CDKTF_MODULE, DOCS_DIR, INDEX_PAGE, listGenerated, pageName, renderDocs } from '../../scripts/generate-docs.js';
import { declarableKinds, formatConfigError, loadConfig, resolveSecrets } from '../../src/config/index.js';
import { DataSourceHandler } from '../../src/provider/data-source.js';
import { ListCache } from '../../src/provider/list-cache.js';
import { writeOnlyConflicts } from '../../src/provider/resource.js';
import {
  dataSourceSpecs,
  providerSchemaMessage,
  resourceSpecs,
  schemaMessage,
  type AttrSpec,
  type ResourceSpec,
} from '../../src/provider/schema.js';
import { validateConfig } from '../../src/provider/validate.js';
import { UNKNOWN, type TfObject, type TfValue } from '../../src/provider/values.js';

const ROOT = join(import.meta.dirname, '..', '..');
let pages: Map<string, string>;
beforeAll(() => {
  pages = renderDocs();
});

/** The contents of every fenced block of a language in a page. */
function fenced(page: string, lang: string): string[] {
  const out: string[] = [];
  const re = new RegExp('^```' + lang + '\\n([\\s\\S]*?)^```$', 'gm');
  for (let m = re.exec(page); m; m = re.exec(page)) out.push(m[1]);
  return out;
}

const resourcePages = () => [...resourceSpecs().values()].map((spec) => ({ spec, path: `resources/${pageName(spec.typeName)}.md` }));
const dataSourcePages = () => [...dataSourceSpecs().values()].map((spec) => ({ spec, path: `data-sources/${pageName(spec.typeName)}.md` }));

describe('generated reference docs', () => {
  it('are the files the generator writes now (run: node --import tsx scripts/generate-docs.ts)', () => {
    const expected = [...pages.keys()].filter((p) => p !== INDEX_PAGE);
    // Every file there must be one the generator makes: a page of a removed kind is stale too.
    expect(listGenerated()).toEqual(expected);
    expect(existsSync(join(DOCS_DIR, INDEX_PAGE))).toBe(true);
    for (const [path, text] of pages) expect(readFileSync(join(DOCS_DIR, path), 'utf8'), `docs/${path} is stale`).toBe(text);
  });

  it('have one page per resource and data source the provider serves, all linked from the index', () => {
    const index = pages.get(INDEX_PAGE)!;
    for (const { spec, path } of [...resourcePages(), ...dataSourcePages()]) {
      expect(pages.has(path), path).toBe(true);
      expect(index).toContain(`[${spec.typeName}](${path})`);
    }
    expect(pages.size).toBe(1 + resourceSpecs().size + dataSourceSpecs().size);
  });
});

// ---- the Schema sections against the provider's GetProviderSchema message ----

interface Documented {
  group: string;
  flags: string[];
}

/** The flags in `(String, Sensitive, [Write-only](...))`, which may hold parentheses. */
function flagsAt(line: string, start: number): string[] {
  let depth = 0;
  for (let i = start; i < line.length; i++) {
    if (line[i] === '(') depth++;
    if (line[i] === ')' && --depth === 0) {
      return line
        .slice(start + 1, i)
        .split(', ')
        .map((f) => f.replace(/^\[([^\]]+)\]\(.*\)$/, '$1'));
    }
  }
  throw new Error(`unterminated flags in ${line}`);
}

/** Attribute path -> group and flags, as the page's `## Schema` lists them. */
function documentedAttributes(page: string): Map<string, Documented> {
  const out = new Map<string, Documented>();
  let inSchema = false;
  let prefix = '';
  let group = '';
  for (const line of page.split('\n')) {
    if (line.startsWith('## ')) inSchema = line === '## Schema';
    if (!inSchema) continue;
    const nested = /^### Nested Schema for `(.+)`$/.exec(line);
    const heading = /^(?:### )?(Required|Optional|Read-Only):?$/.exec(line);
    const attr = /^- `([^`]+)` /.exec(line);
    if (nested) prefix = `${nested[1]}.`;
    else if (heading) group = heading[1];
    else if (attr) {
      const flags = flagsAt(line, attr[0].length).filter((f) => f !== 'Forces replacement');
      out.set(`${prefix}${attr[1]}`, { group, flags });
    }
  }
  return out;
}

interface MessageAttribute {
  name: string;
  type?: Buffer;
  required?: boolean;
  optional?: boolean;
  computed?: boolean;
  sensitive?: boolean;
  write_only?: boolean;
  nested_type?: { attributes: MessageAttribute[]; nesting: number };
  /** A nested block's attributes. */
  block?: MessageAttribute[];
}

const CTY_LABEL: Record<string, string> = { string: 'String', number: 'Number', bool: 'Boolean' };
function ctyLabel(t: unknown): string {
  if (typeof t === 'string') return CTY_LABEL[t];
  const [kind, elem] = t as [string, unknown];
  return `${kind === 'list' ? 'List' : kind === 'map' ? 'Map' : kind} of ${ctyLabel(elem)}`;
}

/** What the same listing must say, from the schema message Terraform receives. */
function expectedAttributes(attrs: MessageAttribute[], prefix = '', out = new Map<string, Documented>()): Map<string, Documented> {
  for (const a of attrs) {
    const group = a.required ? 'Required' : a.optional ? 'Optional' : 'Read-Only';
    if (a.block) {
      out.set(`${prefix}${a.name}`, { group, flags: ['Block', 'Optional'] });
      expectedAttributes(a.block, `${prefix}${a.name}.`, out);
      continue;
    }
    const type = a.nested_type
      ? a.nested_type.nesting === 1
        ? 'Attributes'
        : 'Attributes List'
      : ctyLabel(JSON.parse(Buffer.from(a.type!).toString('utf8')));
    out.set(`${prefix}${a.name}`, { group, flags: [type, ...(a.sensitive ? ['Sensitive'] : []), ...(a.write_only ? ['Write-only'] : [])] });
    if (a.nested_type) expectedAttributes(a.nested_type.attributes, `${prefix}${a.name}.`, out);
  }
  return out;
}

const sorted = (m: Map<string, Documented>) => [...m].sort(([a], [b]) => (a < b ? -1 : 1));
/** The attributes and, as tfplugindocs lists them, the blocks (`timeouts`: Block, Optional). */
function messageAttributes(message: Record<string, unknown>): MessageAttribute[] {
  const block = (
    message as {
      block: { attributes: MessageAttribute[]; block_types?: { type_name: string; block: { attributes: MessageAttribute[] } }[] };
    }
  ).block;
  return [...block.attributes, ...(block.block_types ?? []).map((b) => ({ name: b.type_name, optional: true, block: b.block.attributes }))];
}

describe('the Schema section of each page', () => {
  it('lists every attribute as `terraform providers schema -json` has it (group, type, sensitive, write-only)', () => {
    for (const { spec, path } of [...resourcePages(), ...dataSourcePages()]) {
      expect(sorted(documentedAttributes(pages.get(path)!)), path).toEqual(
        sorted(expectedAttributes(messageAttributes(schemaMessage(spec)))),
      );
    }
    expect(sorted(documentedAttributes(pages.get(INDEX_PAGE)!))).toEqual(
      sorted(expectedAttributes(messageAttributes(providerSchemaMessage()))),
    );
  });

  it('marks the attributes that force replacement', () => {
    for (const { spec, path } of resourcePages()) {
      const page = pages.get(path)!;
      const lines = page.split('\n');
      for (const a of spec.attrs) {
        const line = lines.find((l) => l.startsWith(`- \`${a.name}\` (`));
        expect(line && flagsAt(line, line.indexOf('(')).includes('Forces replacement'), `${path}: ${a.name}`).toBe(a.replace);
      }
    }
  });
});

// ---- YAML examples: what `dpctl validate --check-secrets` checks ----

describe('YAML examples', () => {
  it('pass dpctl validate with --check-secrets, and end with the page kind', () => {
    const dir = mkdtempSync(join(tmpdir(), 'docs-yaml-'));
    try {
      const declarable = new Set(declarableKinds().map((d) => d.kind));
      for (const { spec, path } of resourcePages()) {
        const blocks = fenced(pages.get(path)!, 'yaml');
        expect(blocks.length, `${path}: YAML examples`).toBe(declarable.has(spec.descriptor.kind) ? 1 : 0);
        for (const text of blocks) {
          const file = join(dir, `${pageName(spec.typeName)}.yaml`);
          writeFileSync(file, text);
          const { config, errors } = loadConfig([file], { cwd: dir });
          const env = Object.fromEntries(
            config.documents.flatMap((d) => d.secrets.map((s) => ['env' in s.ref ? s.ref.env : '', 'a-secret-value-1234'])),
          );
          errors.push(...resolveSecrets(config.documents, { env }).errors);
          expect(errors.map(formatConfigError), path).toEqual([]);
          expect(config.documents.at(-1)?.descriptor.kind, path).toBe(spec.descriptor.kind);
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// ---- HCL examples: attributes of the provider schema, and the provider's ValidateResourceConfig ----

type Parsed = Record<string, Record<string, Record<string, Record<string, unknown>[]>>> & {
  variable?: Record<string, unknown[]>;
  import?: { to: string }[];
};

/** `${...}`: a reference or variable, unknown at validate time. */
const expression = (v: unknown) => (typeof v === 'string' ? /^\$\{(.+)\}$/.exec(v)?.[1] : undefined);

/** Parsed HCL -> the value Terraform would send, with every problem of names, presence and type. */
function tfValue(a: AttrSpec, v: unknown, path: string, problems: string[], refs: string[]): TfValue {
  const expr = expression(v);
  if (expr) {
    refs.push(expr);
    return UNKNOWN;
  }
  switch (a.shape) {
    case 'object':
      return tfObject(a.attrs!, v, `${path}.`, problems, refs);
    case 'objects':
      if (!Array.isArray(v)) problems.push(`${path}: must be a list of objects`);
      return Array.isArray(v) ? v.map((item, i) => tfObject(a.attrs!, item, `${path}[${i}].`, problems, refs)) : null;
    case 'list':
      if (!Array.isArray(v)) problems.push(`${path}: must be a list`);
      return Array.isArray(v) ? v.map((item, i) => tfValue({ ...a, shape: 'primitive' }, item, `${path}[${i}]`, problems, refs)) : null;
    case 'map':
      if (v === null || typeof v !== 'object' || Array.isArray(v)) problems.push(`${path}: must be a map`);
      return v as TfObject;
    case 'primitive': {
      const want = a.elem === 'bool' ? 'boolean' : a.elem;
      if (typeof v !== want) problems.push(`${path}: must be a ${a.elem}, got ${JSON.stringify(v)}`);
      return v as TfValue;
    }
  }
}

function tfObject(attrs: AttrSpec[], v: unknown, prefix: string, problems: string[], refs: string[]): TfObject {
  const given = (v ?? {}) as Record<string, unknown>;
  for (const key of Object.keys(given))
    if (!attrs.some((a) => a.name === key)) problems.push(`${prefix}${key}: not an attribute of the provider schema`);
  const out: TfObject = {};
  for (const a of attrs) {
    if (!(a.name in given)) {
      if (a.required) problems.push(`${prefix}${a.name}: required`);
      out[a.name] = null;
      continue;
    }
    if (!a.required && !a.optional) problems.push(`${prefix}${a.name}: computed, cannot be set`);
    out[a.name] = tfValue(a, given[a.name], `${prefix}${a.name}`, problems, refs);
  }
  return out;
}

const blocksOf = (parsed: Parsed, kind: 'resource' | 'data') =>
  Object.entries(parsed[kind] ?? {}).flatMap(([type, byLabel]) =>
    Object.entries(byLabel).map(([label, bodies]) => ({ type, label, body: bodies[0] })),
  );

/** Problems of one page's HCL: attributes, validation, and references to blocks the example does not declare. */
function hclProblems(parsed: Parsed): string[] {
  const problems: string[] = [];
  const refs: string[] = [];
  const declared = new Set([
    ...blocksOf(parsed, 'resource').map((b) => `${b.type}.${b.label}`),
    ...blocksOf(parsed, 'data').map((b) => `data.${b.type}.${b.label}`),
    ...Object.keys(parsed.variable ?? {}).map((v) => `var.${v}`),
  ]);
  for (const { type, label, body } of blocksOf(parsed, 'resource')) {
    const spec = resourceSpecs().get(type);
    if (!spec) problems.push(`resource ${type}: the provider has no such resource`);
    else problems.push(...resourceProblems(spec, body, `${type}.${label}.`, refs));
  }
  for (const { type, label, body } of blocksOf(parsed, 'data')) {
    const spec = dataSourceSpecs().get(type);
    if (!spec) problems.push(`data ${type}: the provider has no such data source`);
    else {
      const config = tfObject(spec.attrs, body, `data.${type}.${label}.`, problems, refs);
      const handler = new DataSourceHandler(
        spec,
        () => {
          throw new Error('no client in a docs test');
        },
        new ListCache(),
      );
      problems.push(...handler.validate(config).map((p) => `data.${type}.${label}: ${p.summary}`));
    }
  }
  for (const imp of parsed.import ?? []) refs.push(expression(imp.to)!);
  for (const ref of refs)
    if (![...declared].some((d) => ref === d || ref.startsWith(`${d}.`))) problems.push(`${ref}: refers to nothing the example declares`);
  return problems;
}

function resourceProblems(spec: ResourceSpec, body: Record<string, unknown>, prefix: string, refs: string[]): string[] {
  const problems: string[] = [];
  const config = tfObject(spec.attrs, body, prefix, problems, refs);
  problems.push(...validateConfig(spec, config).map((e) => `${prefix}${e.field}: ${e.message}`));
  problems.push(...writeOnlyConflicts(spec.attrs, config).map((p) => `${prefix}${p}: both it and its _wo variant are set`));
  return problems;
}

describe('HCL examples', () => {
  it('set only attributes of the provider schema, with the right types, and pass its config validation', async () => {
    for (const { path } of [...resourcePages(), ...dataSourcePages()]) {
      const blocks = fenced(pages.get(path)!, 'terraform');
      expect(blocks.length, path).toBeGreaterThan(0);
      const parsed = (await parseHcl(`${path}.tf`, blocks.join('\n'))) as Parsed;
      expect(hclProblems(parsed), path).toEqual([]);
      const subject = path.startsWith('resources/') ? blocksOf(parsed, 'resource') : blocksOf(parsed, 'data');
      expect(
        subject.map((b) => pageName(b.type)),
        `${path}: the example declares the page's own type`,
      ).toContain(path.replace(/^.*\/|\.md$/g, ''));
    }
  });

  it('configure the provider with arguments it has', async () => {
    const parsed = (await parseHcl('index.tf', fenced(pages.get(INDEX_PAGE)!, 'terraform').join('\n'))) as Parsed & {
      provider: Record<string, Record<string, unknown>[]>;
    };
    const names = messageAttributes(providerSchemaMessage()).map((a) => a.name);
    for (const body of Object.values(parsed.provider).flat()) for (const key of Object.keys(body)) expect(names, key).toContain(key);
  });
});

// ---- cdktf examples: type-checked against src/cdktf as the package exports it ----

describe('cdktf examples', () => {
  it('type-check against the construct library', { timeout: 120_000 }, () => {
    // Under the repository, so that `cdktf` and `constructs` resolve from its node_modules.
    mkdirSync(join(ROOT, 'node_modules', '.cache'), { recursive: true });
    const dir = mkdtempSync(join(ROOT, 'node_modules', '.cache', 'docs-examples-'));
    try {
      const files: string[] = [];
      for (const [path, page] of pages) {
        fenced(page, 'typescript').forEach((text, i) => {
          expect(text, path).toContain(`from '${CDKTF_MODULE}'`);
          const file = join(dir, `${path.replace(/[/.]/g, '_')}_${i}.ts`);
          // The package's `./cdktf` export is src/cdktf/index.ts built; check against the source.
          writeFileSync(file, text.replace(`'${CDKTF_MODULE}'`, `'${join(ROOT, 'src', 'cdktf', 'index.js')}'`));
          files.push(file);
        });
      }
      expect(files.length).toBe(resourceSpecs().size + dataSourceSpecs().size);
      const program = ts.createProgram(files, {
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        esModuleInterop: true,
        resolveJsonModule: true,
      });
      const errors = ts
        .getPreEmitDiagnostics(program)
        .filter((d) => d.file && files.includes(d.file.fileName))
        .map((d) => `${d.file!.fileName.slice(dir.length + 1)}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
      expect(errors).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
