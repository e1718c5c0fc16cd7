import { pushAll } from '../collections.js';
import { ITEMS_PER_STEP, runSteps, runStepsInTurns, type StepRunner } from '../steps.js';
import { lstatSync, readdirSync, readFileSync, readlinkSync, realpathSync, statSync, type Stats } from 'node:fs';
import type { ProblemCode } from '../kinds/errors.js';
import { dirname, isAbsolute, join, posix, relative, resolve, sep } from 'node:path';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { Document, LineCounter } from 'yaml';
import type { ErrorObject } from 'ajv';
import { formatPath, kind as kindNamed, valuesAt } from '../kinds/index.js';
import { dagProblems } from '../kinds/dag.js';
import { toFieldErrors } from '../kinds/validator.js';
import { validate as validateDocument } from './generated/document-validator.js';
import { fastParseDocuments } from './fast-yaml.js';
import { syntaxErrorAt } from './yaml-syntax.js';
import { documentKey, sortErrors, type ConfigError, type SourceLocation } from './errors.js';
import {
  LABELS_FIELD,
  apiToYamlPath,
  isUnder,
  layoutByYamlKind,
  matchesPattern,
  patternOf,
  projectLayout,
  renameAt,
  specToApi,
  yamlToApiPath,
  type KindLayout,
} from './layout.js';
import {
  locationOf,
  subjectOf,
  type ConfigDocument,
  type DocumentReference,
  type DocumentSecret,
  type LoadedConfig,
  type SecretRef,
} from './model.js';
import { documentLocation, keyLocation, valueLocation, walkLocations, yaml, type YamlSource } from './positions.js';
import { checkReferences, declaredLookup, firstOf, type ReferenceLookup } from './references.js';
import { policyOf, unknownPolicyMessage } from './policies.js';
import { shareStrings } from './share-strings.js';
import { scopeCapErrors } from './scope-caps.js';
import { isWithin } from '../paths.js';
import { closest, suggestField, suggestKind } from './suggest.js';
import { defineLazy, defineLazyShared, type ConfigParseCache, type FileResult, type Identified } from './parse-cache.js';

export interface LoadOptions {
  /** File names in messages are relative to this directory (default: the working directory). */
  cwd?: string;
  /**
   * metadata.project may name a project that has no Project document (it exists on the
   * server). Off by default: every project must be declared.
   */
  allowUndeclaredProjects?: boolean;
  /** Resolves references not declared in the loaded set (live resources, for example). */
  lookup?: ReferenceLookup;
  /** Reuses the parse of files whose text did not change since an earlier load (long-running processes). */
  cache?: ConfigParseCache;
  /**
   * Reads nothing whose real path is outside this directory (the controller: a revision's
   * checkout, whose committers must not make it read the controller's own files through a
   * symbolic link). Unset: links are followed anywhere (the CLI, run by the config's author).
   */
  confineTo?: string;
}

export interface LoadResult {
  config: LoadedConfig;
  /** Every problem of every file, sorted by file and position. Empty when the config is valid. */
  errors: ConfigError[];
}

const YAML_FILE = /\.ya?ml$/i;

/**
 * The document schema's validator (the same schema as schemas/document.schema.json, which a test
 * keeps in step), generated at build time as ajv standalone code: nothing is compiled at start-up.
 */
const validator = () => validateDocument as ((value: unknown) => boolean) & { errors?: ErrorObject[] | null };

/**
 * YAML files under a directory, recursively; hidden entries and node_modules are skipped.
 * Symbolic links are followed, to files and to directories (each directory once, so a link to an
 * ancestor ends): a linked directory skipped silently would look like deleted resources to a plan
 * with --prune. A broken link that could be YAML (a .yaml/.yml name, or no extension: perhaps a
 * directory) is listed too, so that reading it reports it.
 */
function listYamlFiles(dir: string, root: string | undefined, seen = new Set<string>([realpathSync(dir)])): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name.startsWith('.') || entry.name === 'node_modules') continue;
    const full = join(dir, entry.name);
    let isDirectory = entry.isDirectory();
    let isFile = entry.isFile();
    if (entry.isSymbolicLink()) {
      const target = statIfExists(full);
      if (!target) {
        if (YAML_FILE.test(entry.name) || !entry.name.includes('.')) out.push(full);
        continue;
      }
      isDirectory = target.isDirectory();
      isFile = target.isFile();
      // Under confinement, a link out of the root that could be YAML (a directory, a *.yaml name:
      // a file, a device) is listed itself, so that reading it reports it once.
      if (root !== undefined && (isDirectory || YAML_FILE.test(entry.name)) && !isWithin(root, realpathSync(full))) {
        out.push(full);
        continue;
      }
    }
    if (isDirectory) {
      const real = realpathSync(full);
      if (seen.has(real)) continue;
      seen.add(real);
      pushAll(out, listYamlFiles(full, root, seen));
    } else if (isFile && YAML_FILE.test(entry.name)) out.push(full);
  }
  return out;
}

/** Why a listed path is not read under confinement (it leads out of the root), or undefined. */
function outsideRoot(path: string, root: string | undefined): string | undefined {
  if (root === undefined) return undefined;
  const real = statIfExists(path) && realpathSync(path);
  return real && !isWithin(root, real) ? `is a symbolic link out of the repository (to ${real}): not read` : undefined;
}

/**
 * The most one YAML file may hold. 100,000 resources in one file are about 30 MB; a file past
 * this is a data dump committed by mistake, and reading it would take the controller's memory
 * (its pod's limit is 2 GiB) before any check could say so.
 */
export const CONFIG_FILE_MAX_BYTES = 64 * 2 ** 20;

function tooLarge(path: string): string | undefined {
  const size = statIfExists(path)?.size ?? 0;
  return size > CONFIG_FILE_MAX_BYTES
    ? `holds ${(Math.ceil((size / 2 ** 20) * 10) / 10).toFixed(1)} MiB; a config file holds at most ${CONFIG_FILE_MAX_BYTES / 2 ** 20} MiB (split it)`
    : undefined;
}

function unreadableMessage(path: string, err: Error): string {
  const link = lstatSync(path, { throwIfNoEntry: false });
  if (link?.isSymbolicLink() && !statIfExists(path)) return `is a symbolic link to ${readlinkSync(path)}, which does not exist`;
  return `cannot be read: ${err.message}`;
}

function statIfExists(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

const displayPath = (cwd: string, abs: string) => {
  const rel = relative(cwd, abs);
  return (rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : abs).split(sep).join('/');
};

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

function identityKey(layout: KindLayout, project: string | undefined, name: string): string {
  const lower = layout.descriptor.normalizers.some(
    (n) => n.rule === 'lowercase' && n.path.length === 1 && n.path[0] === layout.descriptor.identity,
  );
  return JSON.stringify([layout.descriptor.kind, project ?? null, lower ? name.trim().toLowerCase() : name]);
}

/**
 * Equal strings of the documents of one load become one string (see shareStrings): set to the
 * load's own map while one of its steps runs (withStrings), so loads in turns never share one.
 */
let loadStrings: Map<string, string> | undefined;

/** Runs each step of a load with that load's strings. */
const withStrings =
  (strings: Map<string, string>): StepRunner =>
  (step) => {
    const outer = loadStrings;
    loadStrings = strings;
    try {
      return step();
    } finally {
      loadStrings = outer;
    }
  };

/** Loads YAML files and directories (recursively, sorted), validates everything, and reports every error at once. */
export function loadConfig(paths: string | string[], options: LoadOptions = {}): LoadResult {
  return runSteps(loadSteps(paths, options), withStrings(new Map()));
}

/**
 * loadConfig for a process that answers requests meanwhile (the controller): the same load, with a
 * turn of the event loop after a file or ITEMS_PER_STEP documents once TURN_MS have passed
 * (steps.ts). A single file is still parsed in one go.
 */
export function loadConfigInTurns(paths: string | string[], options: LoadOptions = {}): Promise<LoadResult> {
  return runStepsInTurns(loadSteps(paths, options), withStrings(new Map()));
}

/** A load, in steps: it yields after each file and every ITEMS_PER_STEP documents of the checks across files. */
function* loadSteps(paths: string | string[], options: LoadOptions): Generator<void, LoadResult, void> {
  const cwd = resolve(options.cwd ?? process.cwd());
  const root = options.confineTo === undefined ? undefined : realpathSync(resolve(cwd, options.confineTo));
  const errors: ConfigError[] = [];
  const files = new Map<string, string>(); // display -> absolute
  for (const given of Array.isArray(paths) ? paths : [paths]) {
    const abs = resolve(cwd, given);
    let stat;
    try {
      stat = statSync(abs);
    } catch {
      errors.push({ code: 'file_unreadable', file: displayPath(cwd, abs), message: 'no such file or directory' });
      continue;
    }
    const found = stat.isDirectory() && !outsideRoot(abs, root) ? listYamlFiles(abs, root) : [abs];
    if (stat.isDirectory() && !found.length)
      errors.push({ code: 'file_unreadable', file: displayPath(cwd, abs), message: 'no *.yaml or *.yml files in this directory' });
    for (const f of found) files.set(displayPath(cwd, f), f);
  }
  const fileOrder = [...files.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

  const documents: ConfigDocument[] = [];
  const drafts: ConfigDocument[] = []; // invalid documents, kept for their references
  const identified: Identified[] = [];
  options.cache?.beginLoad();
  for (const file of fileOrder) {
    const absolutePath = files.get(file)!;
    const unread = outsideRoot(absolutePath, root) ?? tooLarge(absolutePath);
    if (unread) {
      errors.push({ code: 'file_unreadable', file, message: unread });
      continue;
    }
    let text: string;
    try {
      text = readFileSync(absolutePath, 'utf8');
    } catch (err) {
      errors.push({ code: 'file_unreadable', file, message: unreadableMessage(absolutePath, err as Error) });
      continue;
    }
    const parse = () => loadFile(file, absolutePath, text, options.cache);
    const result = options.cache ? options.cache.lookup(file, absolutePath, text, parse) : parse();
    pushAll(errors, result.errors);
    pushAll(identified, result.identified);
    pushAll(documents, result.documents);
    pushAll(drafts, result.drafts);
    yield;
  }

  // Duplicates across every file: the later one is the error, naming the first.
  const first = new Map<string, Identified>();
  for (const [i, item] of identified.entries()) {
    if (i % ITEMS_PER_STEP === 0) yield;
    const earlier = first.get(item.key);
    if (!earlier) {
      first.set(item.key, item);
      continue;
    }
    const where = item.project !== undefined ? ` in project "${item.project}"` : '';
    const at = earlier.nameLocation;
    errors.push({
      code: 'duplicate_resource',
      ...item.nameLocation,
      subject: `${item.layout.yamlKind}/${item.name}`,
      field: 'metadata.name',
      message: `duplicate ${item.layout.yamlKind} "${item.name}"${where}: already defined at ${at.file}:${at.line}:${at.column}`,
    });
  }

  pushAll(errors, scopeCapErrors(first.values()));
  yield;

  // Every project named must be declared, unless projects may already exist on the server.
  const projectKind = projectLayout();
  const projects = new Set(identified.filter((i) => i.layout === projectKind).map((i) => i.name));
  if (!options.allowUndeclaredProjects) {
    for (const item of identified) {
      if (item.project === undefined || projects.has(item.project)) continue;
      errors.push({
        code: 'undeclared_project',
        ...(item.projectLocation ?? item.nameLocation),
        subject: `${item.layout.yamlKind}/${item.name}`,
        field: 'metadata.project',
        message: `no Project document named "${item.project}" (declare it, or allow projects that exist on the server with --allow-undeclared-projects)`,
        relation: { follows: [documentKey(projectKind.yamlKind, undefined, item.project)] },
      });
    }
  }
  yield;

  // References by name: to a document of the loaded set (valid or not: its own errors are reported), else the given lookup.
  const declared = declaredLookup(
    identified.map((i) => ({ descriptor: i.layout.descriptor, yamlKind: i.layout.yamlKind, project: i.project, name: i.name })),
  );
  yield;
  const lookup = firstOf(declared, options.lookup);
  for (const [i, doc] of [...documents, ...drafts].entries()) {
    errors.push(...checkReferences(doc, lookup));
    if (i % ITEMS_PER_STEP === 0) yield;
  }
  // Pipeline steps and dbt models must form a DAG: caught here, before the API would refuse them.
  for (const [i, doc] of documents.entries()) {
    if (i % ITEMS_PER_STEP === 0) yield;
    for (const problem of dagProblems(doc.descriptor.dags, doc.body)) {
      errors.push({
        code: 'invalid_resource',
        ...locationOf(doc, problem.field),
        subject: subjectOf(doc),
        field: `spec.${problem.field}`,
        message: problem.message,
      });
    }
  }

  options.cache?.persistent?.settle();
  return { config: { files: fileOrder, documents }, errors: sortErrors(errors, fileOrder) };
}

/**
 * Parses one file and checks each of its documents on its own.
 *
 * The common case, a file without errors, takes the fast path: values from the persistent cache
 * (valid documents of a file with the same text, schema and version) or from js-yaml
 * (fast-yaml.ts), checked with the generated validator, with positions computed only if someone
 * asks for one (an error found later: a reference, a secret, a duplicate). A file with any
 * problem, or any YAML the fast path leaves alone, is loaded the full way (`yaml` with positions),
 * so errors read exactly the same whichever path a file took.
 */
function loadFile(file: string, absolutePath: string, text: string, cache?: ConfigParseCache): FileResult {
  const persistent = cache?.persistent;
  const key = persistent?.keyOf(text);
  const cached = key ? persistent!.read(key) : undefined;
  if (cached) {
    const result = loadFileFast(file, absolutePath, text, cached, true);
    if (result) return result;
  }
  const values = fastParseDocuments(text);
  if (values) {
    const result = loadFileFast(file, absolutePath, text, values, false);
    if (result) {
      if (key) persistent!.write(key, values);
      return result;
    }
  }
  return loadFileFull(file, absolutePath, text);
}

/**
 * Positions of a file's documents, parsed with `yaml` the first time one is asked for. One per
 * file, shared by its documents. Until then (most loads never ask), the fast path keeps only the
 * file's text, deflated: YAML packs 5-30x, and at 100,000 documents the text was ~0.3 KB each
 * (~15 ms per 3 MB to pack; the exact text, so positions stay exact).
 */
class FilePositions {
  private docs?: Document.Parsed[];
  private lineCounter?: LineCounter;
  /** The deflated text as a one-byte string (a Buffer from zlib holds a whole 16 KB chunk). */
  private packed?: string;

  constructor(
    readonly file: string,
    readonly absolutePath: string,
    text: string | undefined,
    parsed?: { docs: Document.Parsed[]; lineCounter: LineCounter },
  ) {
    if (text !== undefined) this.packed = deflateRawSync(text, { level: 1 }).toString('latin1');
    this.docs = parsed?.docs;
    this.lineCounter = parsed?.lineCounter;
  }

  source(index: number): YamlSource {
    if (!this.docs) {
      const { LineCounter, parseAllDocuments } = yaml();
      this.lineCounter = new LineCounter();
      this.docs = [
        ...parseAllDocuments(inflateRawSync(Buffer.from(this.packed!, 'latin1')).toString('utf8'), {
          lineCounter: this.lineCounter,
          merge: true,
        }),
      ] as Document.Parsed[];
      this.packed = undefined;
    }
    return { file: this.file, doc: this.docs[index], lineCounter: this.lineCounter! };
  }
}

/**
 * Where an object built from a document finds its file's positions and the document's index
 * (symbols, not enumerable: invisible to copies, comparisons and JSON). The lazy position
 * properties are computed from them (defineLazyShared), so a document holds no closure.
 */
const POSITIONS = Symbol('dpctl.positions');
const INDEX = Symbol('dpctl.index');
interface Positioned {
  [POSITIONS]: FilePositions;
  [INDEX]: number;
}

function setPositions(obj: object, positions: FilePositions, index: number): void {
  Object.defineProperty(obj, POSITIONS, { value: positions, enumerable: false, writable: false, configurable: true });
  Object.defineProperty(obj, INDEX, { value: index, enumerable: false, writable: false, configurable: true });
}

const sourceOf = (obj: object): YamlSource => {
  const p = obj as Positioned;
  return p[POSITIONS].source(p[INDEX]);
};

/**
 * The fast path: every document valid, or undefined (the caller loads the file the full way).
 * `validated`: the values come from the persistent cache, where only valid documents go.
 */
function loadFileFast(file: string, absolutePath: string, text: string, values: unknown[], validated: boolean): FileResult | undefined {
  const out: FileResult = { errors: [], identified: [], documents: [], drafts: [] };
  const positions = new FilePositions(file, absolutePath, text);
  for (let index = 0; index < values.length; index++) {
    const value = values[index];
    if (value === null || value === undefined) continue;
    if (!isRecord(value)) return undefined;
    const layout = typeof value.kind === 'string' ? layoutByYamlKind(value.kind) : undefined;
    if (!layout) return undefined;
    if (!validated) {
      if (inlineSecrets(layout, value).length) return undefined;
      if (!validator()(value)) return undefined;
    }
    const meta = value.metadata as Record<string, unknown>;
    const name = meta.name;
    const project = typeof meta.project === 'string' ? meta.project : undefined;
    if (typeof name !== 'string' || (layout.projectScoped && project === undefined)) return undefined;
    out.identified.push(identify(layout, name, project, positions, index));
    out.documents.push(buildDocument(positions, layout, value, index, absolutePath, file));
  }
  return out;
}

/** Secrets written inline (a value where a { secretRef } belongs), as spec paths. */
function inlineSecrets(layout: KindLayout, value: Record<string, unknown>): (string | number)[][] {
  const found: (string | number)[][] = [];
  if (!isRecord(value.spec)) return found;
  for (const pattern of layout.secretPaths) {
    for (const f of valuesAt(value.spec, apiToYamlPath(layout, pattern) as string[])) {
      if (f.value === undefined || isRecord(f.value)) continue;
      found.push(['spec', ...f.path]);
    }
  }
  return found;
}

const NAME_LOCATION = Object.freeze({
  nameLocation(this: Identified) {
    return valueLocation(sourceOf(this), ['metadata', 'name']);
  },
});
const NAME_AND_PROJECT_LOCATIONS = Object.freeze({
  ...NAME_LOCATION,
  projectLocation(this: Identified) {
    return valueLocation(sourceOf(this), ['metadata', 'project']);
  },
});

function identify(layout: KindLayout, name: string, project: string | undefined, positions: FilePositions, index: number): Identified {
  const identified = {
    layout,
    name,
    project: layout.projectScoped ? project : undefined,
    key: identityKey(layout, layout.projectScoped ? project : undefined, name),
  } as Identified;
  setPositions(identified, positions, index);
  defineLazyShared(identified, project !== undefined && layout.projectScoped ? NAME_AND_PROJECT_LOCATIONS : NAME_LOCATION);
  return identified;
}

/** The full path: `yaml` with positions, every check with its message. */
function loadFileFull(file: string, absolutePath: string, text: string): FileResult {
  const out: FileResult = { errors: [], identified: [], documents: [], drafts: [] };
  const { LineCounter, parseAllDocuments } = yaml();
  const lineCounter = new LineCounter();
  const docs: Document.Parsed[] = [...parseAllDocuments(text, { lineCounter, merge: true })];
  const positions = new FilePositions(file, absolutePath, undefined, { docs, lineCounter });
  docs.forEach((doc, index) => {
    const src: YamlSource = { file, doc: doc as Document.Parsed, lineCounter };
    if (doc.errors.length) {
      // What the document would have declared, as far as `yaml` recovers it: references to it follow from its syntax error.
      const causes = intendedDocuments(recover(doc), doc);
      for (const e of doc.errors) {
        const at = syntaxErrorAt(text, e);
        const { line, col } = lineCounter.linePos(at.offset);
        out.errors.push({
          code: 'yaml_syntax',
          file,
          line,
          column: col,
          message: `YAML syntax: ${at.message}`,
          relation: { syntax: true, ...(causes.length && { causes }) },
        });
      }
      return;
    }
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 1000 });
    } catch (err) {
      out.errors.push({ code: 'yaml_syntax', ...documentLocation(src), message: `YAML: ${(err as Error).message}` });
      return;
    }
    if (value === null || value === undefined) return; // an empty document (comments only, a trailing ---)
    const result = checkDocument(src, positions, value, index, absolutePath);
    pushAll(out.errors, result.errors);
    if (result.identified) out.identified.push(result.identified);
    if (result.document) (result.valid ? out.documents : out.drafts).push(result.document);
  });
  return out;
}

interface Checked {
  errors: ConfigError[];
  identified?: Identified;
  document?: ConfigDocument;
  valid?: boolean;
}

const SECRET_REF_HINT = '{ secretRef: { env: NAME } } or { secretRef: { file: path } }';

/** Validates one parsed document against the document schema and builds its model. */
function checkDocument(src: YamlSource, positions: FilePositions, value: unknown, index: number, absolutePath: string): Checked {
  if (!isRecord(value)) {
    return {
      errors: [
        { code: 'yaml_syntax', ...documentLocation(src), message: 'a document must be a mapping with apiVersion, kind, metadata and spec' },
      ],
    };
  }
  const kindText = typeof value.kind === 'string' ? value.kind : '(no kind)';
  const meta = isRecord(value.metadata) ? value.metadata : {};
  const name = typeof meta.name === 'string' ? meta.name : undefined;
  // `name: 2025` is a number to YAML: still the name the author gave it.
  const subject = `${kindText}/${name ?? writtenScalars(src.doc.get('metadata', true), 'name')[0] ?? '(unnamed)'}`;
  const layout = typeof value.kind === 'string' ? layoutByYamlKind(value.kind) : undefined;
  const errors: ConfigError[] = [];
  const byField = new Map<string, ConfigError>();
  const report = (parts: (string | number)[], loc: SourceLocation, message: string, code: ProblemCode = codeOfField(parts)) => {
    const field = formatPath(parts);
    const known = byField.get(field);
    if (known) {
      if (!known.message.split('; ').includes(message)) known.message += `; ${message}`;
      return;
    }
    const e: ConfigError = { code, ...loc, subject, field: field || undefined, message };
    byField.set(field, e);
    errors.push(e);
  };

  // Secrets written inline: one clear message, and nothing else about them.
  const suppressed = layout ? inlineSecrets(layout, value) : [];
  for (const parts of suppressed)
    report(parts, valueLocation(src, parts), `is a secret and is never written inline: use ${SECRET_REF_HINT}`, 'inline_secret');

  const validate = validator();
  if (!validate(value)) {
    for (const e of validate.errors ?? []) {
      // A key refused by propertyNames (an unknown dpctl.dev/ annotation): one message at that key, not ajv's branches.
      if (e.schemaPath.includes('/propertyNames/')) continue;
      if (e.keyword === 'propertyNames') {
        const key = [...instancePath(value, e.instancePath), String(e.params.propertyName)];
        report(key, keyLocation(src, key), unknownPolicyMessage(String(e.params.propertyName)));
        continue;
      }
      const [converted] = toFieldErrors([e]);
      if (!converted) continue;
      const instance = instancePath(value, e.instancePath);
      let parts: (string | number)[] = instance;
      let loc: SourceLocation;
      if (e.keyword === 'required') {
        parts = [...instance, String(e.params.missingProperty)];
        loc = valueLocation(src, instance);
      } else if (e.keyword === 'additionalProperties') {
        parts = [...instance, String(e.params.additionalProperty)];
        loc = keyLocation(src, parts);
      } else {
        loc = valueLocation(src, instance);
      }
      if (suppressed.some((s) => isUnder(parts, s))) continue;
      let message = refine(layout, value, parts, e, converted.message);
      // A misspelt or misplaced key: the field meant; "is required" of that field follows from it.
      const suggestion =
        layout && e.keyword === 'additionalProperties' && message === converted.message
          ? suggestField(layout.yamlKind, parts, presentKeys(value, instance))
          : undefined;
      if (suggestion) message += suggestion.hint;
      if (e.keyword === 'type') message += quoteHint(src, parts, e);
      report(parts, loc, message);
      const reported = byField.get(formatPath(parts))!;
      if (suggestion) relate(reported, 'causes', fieldKey(src.file, index, suggestion.intended));
      const renamed = layout && e.keyword === 'additionalProperties' ? renamedTo(layout, parts) : undefined;
      if (renamed) relate(reported, 'causes', fieldKey(src.file, index, [...parts.slice(0, -1), renamed]));
      if (e.keyword === 'required') relate(reported, 'follows', fieldKey(src.file, index, parts));
    }
  }

  let identified: Identified | undefined;
  const project = typeof meta.project === 'string' ? meta.project : undefined;
  if (layout && name !== undefined && (!layout.projectScoped || project !== undefined))
    identified = identify(layout, name, project, positions, index);
  // Not in the loaded set: references to the document it was meant to be follow from its errors.
  for (const meant of identified ? [] : intendedDocuments(value, src.doc)) for (const e of errors) relate(e, 'causes', meant);
  if (!layout || name === undefined || !isRecord(value.metadata)) return { errors, identified };
  // Built for an invalid document too, so its references are still checked; only valid ones are loaded.
  const document = buildDocument(positions, layout, value, index, absolutePath, src.file);
  return { errors, identified, document, valid: errors.length === 0 };
}

/** An ajv instance path as path parts, array indexes as numbers (so positions and field names come out right). */
function instancePath(value: unknown, pointer: string): (string | number)[] {
  const out: (string | number)[] = [];
  let cur: unknown = value;
  for (const raw of pointer.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(cur) && /^\d+$/.test(part)) {
      out.push(Number(part));
      cur = cur[Number(part)];
    } else {
      out.push(part);
      cur = isRecord(cur) ? cur[part] : undefined;
    }
  }
  return out;
}

/** Adds a key to an error's relation (sortErrors puts errors that follow from another under it). */
function relate(e: ConfigError, side: 'causes' | 'follows', key: string): void {
  const relation = (e.relation ??= {});
  const keys = (relation[side] ??= []);
  if (!keys.includes(key)) keys.push(key);
}

/** The key of one field of one document (a file's document by index), for ErrorRelation. */
const fieldKey = (file: string, index: number, parts: (string | number)[]) => `field\0${file}\0${index}\0${formatPath(parts)}`;

/** The keys written in the mapping at `at` of a document. */
function presentKeys(value: unknown, at: (string | number)[]): string[] {
  let cur: unknown = value;
  for (const part of at) cur = isRecord(cur) || Array.isArray(cur) ? (cur as Record<string, unknown>)[part as string] : undefined;
  return isRecord(cur) ? Object.keys(cur) : [];
}

/** A document's value as far as `yaml` recovers it despite syntax errors, or undefined. */
function recover(doc: Document.Parsed): unknown {
  try {
    return doc.toJS({ maxAliasCount: 1000 });
  } catch {
    return undefined;
  }
}

/**
 * The document keys of what a broken document was meant to declare: its kind (or the kind a
 * misspelt one is closest to), its project and each name it was given (from metadata, or dedented
 * to the top level), as written: `name: 2025` (a number) is "2025", and a duplicated `name:` key
 * gives both. Empty when the kind, the name or a project it needs cannot be told.
 */
function intendedDocuments(value: unknown, doc: Document.Parsed): string[] {
  if (!isRecord(value) || typeof value.kind !== 'string') return [];
  const layout = layoutByYamlKind(value.kind) ?? layoutByYamlKind(suggestKind(value.kind) ?? '');
  if (!layout) return [];
  // From metadata, or dedented to the top level.
  const written = (key: string) => [...writtenScalars(doc.get('metadata', true), key), ...writtenScalars(doc.contents, key)];
  const project = written('project')[0];
  if (layout.projectScoped && project === undefined) return [];
  const names = new Set(written('name'));
  return [...names].map((name) => documentKey(layout.yamlKind, layout.projectScoped ? project : undefined, name));
}

/** The source text of every scalar value of `key` in a YAML mapping node (a key given twice gives both). */
function writtenScalars(node: unknown, key: string): string[] {
  const { isMap, isScalar } = yaml();
  if (!isMap(node)) return [];
  const out: string[] = [];
  for (const pair of node.items)
    if (isScalar(pair.key) && pair.key.value === key && isScalar(pair.value) && pair.value.value !== null)
      out.push(pair.value.source ?? String(pair.value.value));
  return out;
}

/**
 * Where a string is expected and YAML read an unquoted number or boolean (`name: 2025`,
 * `version: 1.10`, `enabled: yes` in YAML 1.1 tools), what to write instead.
 */
function quoteHint(src: YamlSource, parts: (string | number)[], e: ErrorObject): string {
  const types = ([] as unknown[]).concat(e.params.type);
  if (!types.includes('string')) return '';
  const node = src.doc.getIn(parts, true);
  const { isScalar } = yaml();
  if (!isScalar(node) || node.type !== 'PLAIN' || !['number', 'boolean'].includes(typeof node.value)) return '';
  const written = node.source ?? String(node.value);
  return `: YAML reads ${written} as a ${typeof node.value}; quote it ("${written}") to keep it text`;
}

/** The code of a schema error at a path: the kind itself, a dpctl.dev/ policy annotation, or any other field. */
function codeOfField(parts: (string | number)[]): ProblemCode {
  if (parts.length === 1 && parts[0] === 'kind') return 'unknown_kind';
  if (parts[0] === 'metadata' && parts[1] === 'annotations' && String(parts[2] ?? '').startsWith('dpctl.dev/')) return 'invalid_policy';
  return 'invalid_field';
}

/** Says what to do instead, where the schema's own message would only say what is wrong. */
function refine(
  layout: KindLayout | undefined,
  value: Record<string, unknown>,
  parts: (string | number)[],
  e: ErrorObject,
  message: string,
): string {
  const [top, ...rest] = parts;
  if (e.keyword === 'const') return `must be ${JSON.stringify(e.params.allowedValue)}`;
  if (top === 'kind' && rest.length === 0 && e.keyword === 'enum') {
    const meant = typeof value.kind === 'string' ? suggestKind(value.kind) : undefined;
    return meant
      ? `unknown kind ${JSON.stringify(value.kind)} (did you mean ${meant}?)`
      : `unknown kind ${JSON.stringify(value.kind)}: ${message}`;
  }
  if (e.keyword === 'enum') return message + enumHint(value, parts, e);
  if (!layout) return message;
  const d = layout.descriptor;
  if (
    top === 'spec' &&
    rest.length &&
    (e.keyword === 'minProperties' || e.keyword === 'maxProperties') &&
    rest[rest.length - 1] === 'secretRef'
  ) {
    return 'must hold exactly one of env or file';
  }
  if (e.keyword !== 'additionalProperties') return message;
  const key = String(parts[parts.length - 1]);
  if (top === 'metadata' && rest.length === 1) {
    if (key === 'project' && !layout.projectScoped) return `is not allowed: a ${layout.yamlKind} does not belong to a project`;
    if (key === LABELS_FIELD && !layout.hasLabels) return `is not allowed: a ${layout.yamlKind} has no labels`;
    return message;
  }
  if (top !== 'spec' || !rest.length) return message;
  const apiPath = yamlToApiPath(layout, rest);
  const parentPattern = patternOf(apiPath.slice(0, -1));
  if (layout.computedPaths.some((p) => matchesPattern(apiPath, p))) return 'is computed by the server and cannot be set';
  if (rest.length === 1 && key === d.identity) return `is not a known field: the ${d.identity} is metadata.name`;
  if (rest.length === 1 && key === LABELS_FIELD && layout.hasLabels) return 'is not a known field: labels go in metadata.labels';
  const rename = renameAt(layout, parentPattern, key, 'api');
  if (rename) return `is not a known field: refer to the ${rename.many ? 'resources' : 'resource'} by name with "${rename.yaml}"`;
  return message;
}

/** ` (did you mean "mysql"?)` for a misspelt enum value, when one allowed value is close. */
function enumHint(value: unknown, parts: (string | number)[], e: ErrorObject): string {
  let given: unknown = value;
  for (const p of parts) given = isRecord(given) || Array.isArray(given) ? (given as Record<string | number, unknown>)[p] : undefined;
  // Only short values: the distance is computed against every allowed value.
  if (typeof given !== 'string' || given.length > 64) return '';
  const allowed = ([] as unknown[]).concat(e.params.allowedValues).filter((v): v is string => typeof v === 'string');
  const meant = closest(given, allowed);
  return meant ? ` (did you mean "${meant}"?)` : '';
}

/**
 * The YAML field an API reference field written in YAML stands for (`connector_id` in a step:
 * `connector`), or undefined: its "is required" follows from the unknown field.
 */
function renamedTo(layout: KindLayout, parts: (string | number)[]): string | undefined {
  const [top, ...rest] = parts;
  if (top !== 'spec' || !rest.length) return undefined;
  const apiPath = yamlToApiPath(layout, rest);
  return renameAt(layout, patternOf(apiPath.slice(0, -1)), String(parts[parts.length - 1]), 'api')?.yaml;
}

/** A copy of metadata.labels: flat (string values, as in every valid document) by spread, anything else by structuredClone. */
function copyLabels(labels: Record<string, unknown>): Record<string, string> {
  for (const k in labels) if (labels[k] !== null && typeof labels[k] === 'object') return structuredClone(labels) as Record<string, string>;
  return { ...labels } as Record<string, string>;
}

/** API field path -> where it is written, for one document (ConfigDocument.locations). */
function fieldLocations(doc: ConfigDocument): Map<string, SourceLocation> {
  const { layout, descriptor: d } = doc;
  const locations = new Map<string, SourceLocation>();
  walkLocations(sourceOf(doc), (path, loc) => {
    const [top, ...rest] = path;
    let field: string | undefined;
    if (path.length === 0) field = '';
    else if (top === 'spec' && rest.length) field = formatPath(yamlToApiPath(layout, rest));
    else if (top === 'metadata' && rest[0] === 'name' && rest.length === 1) field = d.identity;
    else if (top === 'metadata' && rest[0] === 'labels') field = formatPath([LABELS_FIELD, ...rest.slice(1)]);
    if (field !== undefined && !locations.has(field)) locations.set(field, loc);
  });
  return locations;
}

/**
 * A document's lazy properties, computed from the document itself (see setPositions): its
 * positions, and its identity (rarely read, and an object per document).
 */
const DOCUMENT_LAZY = Object.freeze({
  identity(this: ConfigDocument) {
    return { field: this.descriptor.identity, value: this.name };
  },
  source(this: ConfigDocument) {
    const positions = (this as unknown as Positioned)[POSITIONS];
    return { file: positions.file, absolutePath: positions.absolutePath, index: (this as unknown as Positioned)[INDEX] };
  },
  location(this: ConfigDocument) {
    return documentLocation(sourceOf(this));
  },
  locations(this: ConfigDocument) {
    return fieldLocations(this);
  },
});

/** The references or secrets of a document that has none: one frozen array for all of them (documents are never changed after loading). */
const NONE: never[] = Object.freeze([]) as unknown as never[];

/** `obj.location` computed on first read: where `field` of `doc` is written. */
function locateAt(obj: { location: SourceLocation }, doc: ConfigDocument, field: string): void {
  defineLazy(obj, 'location', () => locationOf(doc, field));
}

/**
 * The document's model. Its positions (location, locations, those of references and secrets),
 * its identity and source are computed when first read.
 */
function buildDocument(
  positions: FilePositions,
  layout: KindLayout,
  value: Record<string, unknown>,
  index: number,
  absolutePath: string,
  file: string,
): ConfigDocument {
  // Flattened: no string of the document is a slice that keeps its file's text alive (FilePositions keeps it packed).
  if (loadStrings) shareStrings(value, loadStrings, true);
  const d = layout.descriptor;
  const meta = value.metadata as Record<string, unknown>;
  const name = meta.name as string;
  const project = layout.projectScoped && typeof meta.project === 'string' ? meta.project : undefined;
  const labels = copyLabels((isRecord(meta.labels) ? meta.labels : {}) as Record<string, string>);
  const spec = (isRecord(value.spec) ? specToApi(layout, value.spec) : {}) as Record<string, unknown>;
  // One labels copy for both: documents are never changed after loading (the plan copies what it
  // changes). Labels in the literal, not added after: an object grown by one property after a
  // spread keeps it in a separate backing store (~40 bytes more per document).
  const body: Record<string, unknown> =
    layout.hasLabels && meta.labels !== undefined
      ? { [d.identity]: name, ...spec, [LABELS_FIELD]: labels }
      : { [d.identity]: name, ...spec };

  const doc = {
    descriptor: d,
    layout,
    yamlKind: layout.yamlKind,
    name,
    project,
    labels,
    body,
    references: NONE,
    secrets: NONE,
    policy: policyOf(meta.annotations),
  } as unknown as ConfigDocument;
  setPositions(doc, positions, index);
  defineLazyShared(doc, DOCUMENT_LAZY);

  const references: DocumentReference[] = [];
  for (const ref of d.references) {
    for (const found of valuesAt(body, ref.path)) {
      if (typeof found.value !== 'string') continue;
      const field = formatPath(found.path);
      const reference = {
        path: found.path,
        field,
        yamlField: formatPath(['spec', ...apiToYamlPath(layout, found.path)]),
        kind: ref.kind,
        yamlKind: kindNamed(ref.kind).yamlKind ?? ref.kind,
        name: found.value,
      } as DocumentReference;
      locateAt(reference, doc, field);
      references.push(reference);
    }
  }
  if (references.length) doc.references = references;
  const secrets: DocumentSecret[] = [];
  for (const pattern of d.secretPaths) {
    for (const found of valuesAt(body, pattern)) {
      if (!isRecord(found.value) || !isRecord(found.value.secretRef)) continue;
      const ref = found.value.secretRef as SecretRef;
      if (!('env' in ref ? typeof ref.env === 'string' : typeof ref.file === 'string')) continue;
      const field = formatPath(found.path);
      const secret = {
        path: found.path,
        field,
        yamlField: formatPath(['spec', ...apiToYamlPath(layout, found.path)]),
        ref: 'env' in ref ? { env: ref.env } : { file: ref.file },
      } as DocumentSecret;
      locateAt(secret, doc, `${field}.secretRef.${'env' in ref ? 'env' : 'file'}`);
      secret.baseDir = dirname(absolutePath);
      secret.displayFile = 'file' in ref ? (isAbsolute(ref.file) ? ref.file : posix.join(posix.dirname(file), ref.file)) : undefined;
      secrets.push(secret);
    }
  }
  if (secrets.length) doc.secrets = secrets;
  return doc;
}
