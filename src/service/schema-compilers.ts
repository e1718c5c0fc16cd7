import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifySchemaCompiler } from 'fastify';
import { createAjv } from '../kinds/validator.js';

/**
 * The compilers of the routes' schemas (Ajv for requests, fast-json-stringify for responses),
 * each schema compiled once per process. Compiling every route's schemas cost about 1 s of each
 * service start, and a process can start several: the controller's embedded service after a
 * restart, every test. The routes' schemas come from the kinds, so a process holds a fixed set:
 * the caches are keyed by content (a schema built afresh for another start finds its compiled
 * code), and what they hold is pure functions.
 */

type Validate = ReturnType<ReturnType<typeof createAjv>['compile']>;
let ajvs: { body: ReturnType<typeof createAjv>; query: ReturnType<typeof createAjv> } | undefined;
const validators = new Map<string, Validate>();

/** Validation with our Ajv: defaults filled in; query strings (and params, headers) coerced. */
export const compileValidator: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) => {
  const part = httpPart === 'body' ? 'body' : 'query';
  const key = `${part} ${JSON.stringify(schema)}`;
  let validate = validators.get(key);
  if (!validate) {
    ajvs ??= { body: createAjv({ useDefaults: true }), query: createAjv({ coerceTypes: true, useDefaults: true }) };
    const ajv = ajvs[part];
    // The same $id with other content (a start with other options): the newer one replaces it.
    const id = (schema as { $id?: string }).$id;
    if (id && ajv.getSchema(id)) ajv.removeSchema(id);
    validate = ajv.compile(schema as object);
    validators.set(key, validate);
  }
  return validate;
};

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
