import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { cronError } from './cron.js';
import { documentPatternError, safeRegexError } from './safe-regex.js';
import { nameError } from './names.js';
import { isTimestamp } from './timestamps.js';
import { formatPath } from './walk.js';

/** Our keywords that only annotate (they drive surfaces, not validation). */
const ANNOTATIONS = [
  'x-kind', 'x-yaml-kind', 'x-collection', 'x-scope', 'x-identity', 'x-operations', 'x-spec-operations',
  'x-write-permission', 'x-read-permission', 'x-read-only-kind', 'x-deleted-with-parent', 'x-computed', 'x-immutable', 'x-secret',
  'x-sensitive', 'x-once', 'x-ref', 'x-normalize', 'x-extension', 'x-initial', 'x-dag',
];

/**
 * An Ajv instance that knows our keywords. `x-format` is a real check: cron expressions
 * and regular expressions (RE2 syntax, see safe-regex.ts) are validated with a message a user
 * can act on.
 */
export function createAjv(options: { coerceTypes?: boolean; useDefaults?: boolean } = {}) {
  const ajv = new Ajv2020({
    allErrors: true,
    strict: false,
    coerceTypes: options.coerceTypes ?? false,
    useDefaults: options.useDefaults ?? false,
    removeAdditional: false,
  });
  (addFormats as unknown as (a: Ajv2020) => void)(ajv);
  // Stricter than ajv-formats: no leap seconds or years the store cannot order (see timestamps.ts).
  ajv.addFormat('date-time', { type: 'string', validate: isTimestamp });
  for (const keyword of ANNOTATIONS) ajv.addKeyword({ keyword, schemaType: ['boolean', 'string', 'array', 'object'] });
  ajv.addKeyword({
    keyword: 'x-format',
    type: 'string',
    schemaType: 'string',
    errors: true,
    validate: function check(format: string, value: string, _parent?: unknown, cxt?: { instancePath: string; rootData: unknown }) {
      let message: string | null = null;
      if (format === 'cron') message = cronError(value);
      if (format === 'name') message = nameError(value);
      // Checked with the engine that will run it (RE2 semantics, bounded size), not V8's RegExp.
      if (format === 'regex') message = cxt && typeof cxt.rootData === 'object' && cxt.rootData ? documentPatternError(value, cxt.rootData, cxt.instancePath) : safeRegexError(value);
      if (message) (check as unknown as { errors: Partial<ErrorObject>[] }).errors = [{ keyword: 'x-format', message, params: {} }];
      return message === null;
    },
  });
  return ajv;
}

export interface FieldError {
  field: string;
  message: string;
}

/**
 * Turns Ajv's errors into one entry per field, named the way users write them (steps[0].name).
 * A value that breaks several rules (too short and not matching a pattern) gets one entry whose
 * message joins them.
 */
export function toFieldErrors(errors: ErrorObject[] | null | undefined, prefix = ''): FieldError[] {
  const out: FieldError[] = [];
  const byField = new Map<string, { entry: FieldError; messages: Set<string> }>();
  for (const e of errors ?? []) {
    if (e.keyword === 'if' || e.keyword === 'allOf') continue;
    const parts = e.instancePath.split('/').filter(Boolean).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
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
    }
    const field = formatPath(prefix ? [prefix, ...parts] : parts) || prefix || '(body)';
    const known = byField.get(field);
    if (known) {
      if (!known.messages.has(message)) known.entry.message += `; ${message}`;
      known.messages.add(message);
      continue;
    }
    const entry = { field, message };
    byField.set(field, { entry, messages: new Set([message]) });
    out.push(entry);
  }
  return out;
}

export type { ValidateFunction };
