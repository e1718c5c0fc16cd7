import { createHash } from 'node:crypto';
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifySchemaCompiler, FastifyServerOptions } from 'fastify';
import { createAjv, validatorsOf, type Validator } from '../kinds/validator.js';
import * as BODY_VALIDATORS from './generated/body-validators.js';
import * as QUERY_VALIDATORS from './generated/query-validators.js';

/**
 * The compilers of the routes' schemas (Ajv for requests, fast-json-stringify for responses).
 * Compiling every route's request schemas cost about 0.6 s of each service start, so they are
 * generated at build time (validator-codegen.ts, `npm run generate`), looked up by a hash of the
 * schema; a schema not among them (a start with other options) is compiled, once per process. The
 * caches are keyed by content: a schema built afresh for another start in the same process (every
 * test, an embedding application) finds the function already made. What they hold is pure
 * functions, and a process holds a fixed set of schemas (they come from the kinds).
 */

/** The Ajv options of each part of a request: defaults filled in; query strings (params, headers) coerced. */
export const REQUEST_AJV = { body: { useDefaults: true }, query: { coerceTypes: true, useDefaults: true } } as const;
export type RequestPart = keyof typeof REQUEST_AJV;

const GENERATED: Record<RequestPart, Record<string, Validator | undefined>> = {
  body: validatorsOf(BODY_VALIDATORS),
  query: validatorsOf(QUERY_VALIDATORS),
};

/** The generated module's export name of a schema (given as its JSON text): a hash of its content. */
export const validatorName = (text: string) => `v${createHash('sha256').update(text).digest('hex').slice(0, 24)}`;

let ajvs: Record<RequestPart, ReturnType<typeof createAjv>> | undefined;
const validators = new Map<string, Validator>();
let observer: ((part: RequestPart, schema: object) => void) | undefined;

/** Runs `run` (a service start) and calls `observe` with every request schema its routes compile: the generator's view. */
export async function observeRequestSchemas(run: () => Promise<void>, observe: (part: RequestPart, schema: object) => void) {
  observer = observe;
  try {
    await run();
  } finally {
    observer = undefined;
  }
}

let compiledAtRunTime = 0;
/** How many request schemas this process compiled at run time (none for a default start: all are generated). */
export const runTimeCompiles = () => compiledAtRunTime;

export const compileValidator: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) =>
  requestValidator(httpPart === 'body' ? 'body' : 'query', schema as object);

type ValidatorFactory = NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>['buildValidator'];

/**
 * Fastify's validator factory: our compiler, whatever shared schemas and Ajv options it is given.
 * Given as a factory, Fastify does not load its own Ajv compiler (~0.1 s of a start). Its type is
 * @fastify/ajv-compiler's, which takes Ajv's compile signature for granted.
 */
export const buildValidator = (() => compileValidator) as unknown as ValidatorFactory;

/** The validator of a request schema: generated, or compiled once per process. */
export function requestValidator(part: RequestPart, schema: object): Validator {
  observer?.(part, schema);
  const text = JSON.stringify(schema);
  const key = `${part} ${text}`;
  let validate = validators.get(key);
  if (!validate) {
    validate = GENERATED[part][validatorName(text)] ?? compileNow(part, schema);
    validators.set(key, validate);
  }
  return validate;
}

function compileNow(part: RequestPart, schema: object): Validator {
  compiledAtRunTime++;
  ajvs ??= { body: createAjv(REQUEST_AJV.body), query: createAjv(REQUEST_AJV.query) };
  const ajv = ajvs[part];
  // The same $id with other content (a start with other options): the newer one replaces it.
  const id = (schema as { $id?: string }).$id;
  if (id && ajv.getSchema(id)) ajv.removeSchema(id);
  return ajv.compile(schema);
}

type SerializerFactory = ReturnType<typeof SerializerSelector>;
const serializers = new Map<string, ReturnType<ReturnType<SerializerFactory>>>();
const buildDefault = SerializerSelector();

/** Fastify's own serializer factory (fast-json-stringify), its compiled functions kept by schema and shared schemas. */
export const buildSerializer: SerializerFactory = (externalSchemas, options) => {
  const compile = buildDefault(externalSchemas, options);
  const shared = JSON.stringify([externalSchemas, options]);
  return (route) => {
    const key = `${shared} ${JSON.stringify(route.schema)}`;
    let serialize = serializers.get(key);
    if (!serialize) {
      serialize = compile(route);
      serializers.set(key, serialize);
    }
    return serialize;
  };
};
