import { createRequire } from 'node:module';
import type { Ajv2020 as Ajv2020Class, ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import type { KeywordCxt } from 'ajv';
import type * as Codegen from 'ajv/dist/compile/codegen/index.js';
import { formatPath } from './walk.js';
import { xFormatError } from './x-format.js';
import { isTimestamp } from './timestamps.js';

/** Our keywords that only annotate (they drive surfaces, not validation). */
export const ANNOTATIONS = [
  'x-kind',
  'x-yaml-kind',
  'x-collection',
  'x-scope',
  'x-scope-container',
  'x-identity',
  'x-operations',
  'x-spec-operations',
  'x-write-permission',
  'x-read-permission',
  'x-read-only-kind',
  'x-deleted-with-parent',
  'x-max-per-scope',
  'x-health',
  'x-test-action',
  'x-provisioning',
  'x-computed',
  'x-immutable',
  'x-secret',
  'x-sensitive',
  'x-once',
  'x-ref',
  'x-normalize',
  'x-extension',
  'x-initial',
  'x-dag',
];

// Ajv itself (about 0.1 s to load) is loaded on the first createAjv: the CLI validates YAML with
// validators generated at build time (src/config/generated/) and never needs it on that path.
const require = createRequire(import.meta.url);
const loadAjv = () => ({
  Ajv2020: (require('ajv/dist/2020.js') as typeof import('ajv/dist/2020.js')).Ajv2020,
  addFormats: require('ajv-formats') as (a: Ajv2020Class) => void,
  codegen: require('ajv/dist/compile/codegen/index.js') as typeof Codegen,
  names: (require('ajv/dist/compile/names.js') as { default: typeof import('ajv/dist/compile/names.js').default }).default,
});

export interface StandaloneCode {
  /** Identifier of the generated module's value holding the formats (`formats` of src/kinds/formats.ts). */
  formats: string;
  /** Identifier of the generated module's value holding xFormatError (src/kinds/x-format.ts). */
  xFormat: string;
}

/**
 * An Ajv instance that knows our keywords. `x-format` is a real check: cron expressions, names
 * and regular expressions (RE2 syntax, see safe-regex.ts) are validated with a message a user
 * can act on. It is defined with `code` calling xFormatError, so the same definition works in
 * schemas compiled here and in standalone code generated at build time (`standalone`: the names
 * that the generated module imports the formats and xFormatError as).
 */
export function createAjv(options: { coerceTypes?: boolean; useDefaults?: boolean; standalone?: StandaloneCode } = {}) {
  const { Ajv2020, addFormats, codegen, names } = loadAjv();
  const { _, strConcat } = codegen;
  const standalone = options.standalone;
  const ajv = new Ajv2020({
    allErrors: true,
    strict: false,
    coerceTypes: options.coerceTypes ?? false,
    useDefaults: options.useDefaults ?? false,
    removeAdditional: false,
    ...(standalone ? { code: { source: true, esm: true, formats: new codegen.Name(standalone.formats) } } : {}),
  });
  addFormats(ajv);
  // Stricter than ajv-formats: no leap seconds or years the store cannot order (see timestamps.ts).
  // (The same definition as src/kinds/formats.ts, which standalone code imports.)
  ajv.addFormat('date-time', { type: 'string', validate: isTimestamp });
  for (const keyword of ANNOTATIONS) ajv.addKeyword({ keyword, schemaType: ['boolean', 'string', 'array', 'object'] });
  ajv.addKeyword({
    keyword: 'x-format',
    type: 'string',
    schemaType: 'string',
    error: {
      message: ({ params }) => params.message as Codegen.Code,
      params: () => _`{}`,
    },
    code(cxt: KeywordCxt) {
      const { gen, data, schema, it } = cxt;
      const check = gen.scopeValue('func', { ref: xFormatError, ...(standalone ? { code: new codegen.Name(standalone.xFormat) } : {}) });
      const message = gen.const(
        'xFormatMessage',
        _`${check}(${schema as string}, ${data}, ${names.rootData}, ${strConcat(names.instancePath, it.errorPath)})`,
      );
      cxt.setParams({ message });
      cxt.fail(_`${message} !== null`);
    },
  });
  return ajv;
}

export interface FieldError {
  field: string;
  message: string;
}

/**
 * Details one validation error reports at most. Ajv reports every error (allErrors), and one
 * request body (1 MiB) can break a rule 500,000 times (`selected_tables: [1,1,1,...]`, 60,000
 * unknown fields): one detail each was an answer of 51 MB and 3 s of the event loop every tenant
 * shares. Past the cap the rest are only counted, and the message says how many there were.
 */
export const MAX_FIELD_ERRORS = 100;

/** Field errors up to a cap, and how many of Ajv's errors were left out past it. */
export interface CappedFieldErrors {
  details: FieldError[];
  /** Ajv errors after the last detail, not looked at (several may concern one field): 0 when none were left out. */
  omitted: number;
}

/** Keywords whose error only repeats the errors of their subschemas (an `if`/`then` failing, an `allOf` branch). */
const WRAPPERS = new Set(['if', 'allOf']);

/** The field an Ajv error is about, named the way users write them (steps[0].name), and its message. */
function fieldErrorOf(e: ErrorObject, prefix: string): FieldError {
  const parts = e.instancePath
    .split('/')
    .filter(Boolean)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  let message = e.message ?? 'is invalid';
  if (e.keyword === 'required') {
    parts.push(String(e.params.missingProperty));
    message = 'is required';
  } else if (e.keyword === 'additionalProperties') {
    parts.push(String(e.params.additionalProperty));
    message = 'is not a known field';
  } else if (e.keyword === 'enum') {
    message = `must be one of: ${(e.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
  } else if (e.keyword === 'type') {
    message = `must be ${e.params.type}`;
  } else if (e.keyword === 'uniqueItems') {
    // Ajv: "must NOT have duplicate items (items ## 2 and 1 are identical)".
    const [a, b] = [Number(e.params.i), Number(e.params.j)].sort((x, y) => x - y);
    message = `must not repeat an item ([${a}] and [${b}] are the same)`;
  }
  return { field: formatPath(prefix ? [prefix, ...parts] : parts) || prefix || '(body)', message };
}

/**
 * Turns Ajv's errors into one entry per field, at most `max` of them. A value that breaks several
 * rules (too short and not matching a pattern) gets one entry whose message joins them. The work
 * is bounded by `max` too: errors are mapped in order and the walk stops at the first one that
 * would be field number `max + 1`; the ones after it are counted, not mapped.
 */
export function capFieldErrors(errors: ErrorObject[] | null | undefined, max = MAX_FIELD_ERRORS, prefix = ''): CappedFieldErrors {
  const details: FieldError[] = [];
  const byField = new Map<string, { entry: FieldError; messages: Set<string> }>();
  const all = errors ?? [];
  for (let i = 0; i < all.length; i++) {
    const e = all[i];
    if (WRAPPERS.has(e.keyword)) continue;
    const { field, message } = fieldErrorOf(e, prefix);
    const known = byField.get(field);
    if (known) {
      if (!known.messages.has(message)) known.entry.message += `; ${message}`;
      known.messages.add(message);
      continue;
    }
    if (details.length === max) {
      let omitted = 0;
      for (let j = i; j < all.length; j++) if (!WRAPPERS.has(all[j].keyword)) omitted++;
      return { details, omitted };
    }
    const entry = { field, message };
    byField.set(field, { entry, messages: new Set([message]) });
    details.push(entry);
  }
  return { details, omitted: 0 };
}

/** Every field error (the CLI's and the provider's own files; the service caps them: capFieldErrors). */
export function toFieldErrors(errors: ErrorObject[] | null | undefined, prefix = ''): FieldError[] {
  return capFieldErrors(errors, Infinity, prefix).details;
}

/** The message of capped field errors: `a must be string; b is required`, then how many more there were. */
export function fieldErrorsText({ details, omitted }: CappedFieldErrors): string {
  const listed = details.map((d) => `${d.field} ${d.message}`).join('; ');
  if (!omitted) return listed;
  return `${listed}; and ${omitted.toLocaleString('en-US')} more ${omitted === 1 ? 'error' : 'errors'} (only the first ${details.length} fields are listed)`;
}

export type { ValidateFunction };

/** A validation function: compiled here, or generated at build time (ajv standalone code, see standalone.ts). */
export type Validator = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null };

/** The validators of a generated module (untyped: `@ts-nocheck`) by export name. */
export const validatorsOf = (module: object) => module as Record<string, Validator | undefined>;

/** One validator of a generated module; a missing one means the module is older than the schemas. */
export function generatedValidator(module: object, name: string): Validator {
  const validate = validatorsOf(module)[name];
  if (!validate) throw new Error(`no generated validator ${name}: run npm run generate`);
  return validate;
}
