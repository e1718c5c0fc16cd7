import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { KindDescriptor, JsonSchema, Operation } from '../../kinds/index.js';
import type { ServiceContext, RouteSettings } from '../context.js';
import { DEFAULT_LIMIT, MAX_LIMIT } from '../pagination.js';
import { capsBeforeValidation } from '../behaviours/item-caps.js';
import { handleCreate, handleDelete, handleGet, handleList, handleUpdate, kindRoutes, type KindRoutes } from './kind-handlers.js';

export const ERROR_REF = { $ref: 'ErrorEnvelope#' };
export const errorResponses = { '4xx': ERROR_REF, '5xx': ERROR_REF };

export const pageQuerySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT, description: `Items per page (1-${MAX_LIMIT}).` },
    cursor: { type: 'string', description: 'next_cursor of the previous page.' },
  },
};

export const pageSchema = (items: JsonSchema) => ({
  type: 'object',
  description: `A page of ${items.title ?? 'item'} resources, in creation order`,
  required: ['data', 'has_more'],
  properties: { data: { type: 'array', items }, next_cursor: { type: 'string' }, has_more: { type: 'boolean' } },
});

/** Where a kind's routes hang: under its project, and for project kinds also unprefixed (the API key's project). */
interface Base {
  path: string;
  /** The unprefixed paths are an extension of the spec. */
  extension: boolean;
}

function basesOf(d: KindDescriptor): Base[] {
  return d.scope === 'project'
    ? [
        { path: `/api/v1/projects/:id/${d.collection}`, extension: false },
        { path: `/api/v1/${d.collection}`, extension: true },
      ]
    : [{ path: `/api/v1/${d.collection}`, extension: false }];
}

const UNPREFIXED_TAG = 'Unprefixed paths (API key project)';

type Handler = (k: KindRoutes, req: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/** One generic operation: how it is routed, who may call it, and its schema beyond the common part. */
interface OperationRoute {
  op: Operation;
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** Under `/:resourceId`. */
  one: boolean;
  write: boolean;
  /** The schema after tags, operationId and the extension mark; `params` are the path's. */
  schema: (k: KindRoutes, params: Record<string, unknown>) => Record<string, unknown>;
  handler: Handler;
}

/** In registration order (list, create, get, update, delete), which is also the OpenAPI document's. */
const OPERATIONS: OperationRoute[] = [
  {
    op: 'list',
    method: 'GET',
    one: false,
    write: false,
    schema: ({ d }, params) => ({
      summary: `List ${d.title.toLowerCase()}s`,
      params,
      querystring: pageQuerySchema,
      response: { 200: pageSchema(d.responseSchema), ...errorResponses },
    }),
    handler: handleList,
  },
  {
    op: 'create',
    method: 'POST',
    one: false,
    write: true,
    schema: ({ d, a }, params) => ({
      summary: `Create ${a}`,
      params,
      body: d.createSchema,
      response: { 201: d.responseSchema, ...errorResponses },
    }),
    handler: handleCreate,
  },
  {
    op: 'get',
    method: 'GET',
    one: true,
    write: false,
    schema: ({ d, a }, params) => ({ summary: `Get ${a}`, params, response: { 200: d.responseSchema, ...errorResponses } }),
    handler: handleGet,
  },
  {
    op: 'update',
    method: 'PATCH',
    one: true,
    write: true,
    schema: ({ d, a }, params) => ({
      summary: `Update ${a}`,
      description:
        'Fields given replace the stored ones; omitted fields are kept; null clears an optional field (back to its default). Write-only secrets omitted from a nested object keep their stored value.',
      params,
      body: d.updateSchema,
      response: { 200: d.responseSchema, ...errorResponses },
    }),
    handler: handleUpdate,
  },
  {
    op: 'delete',
    method: 'DELETE',
    one: true,
    write: true,
    schema: ({ a }, params) => ({
      summary: `Delete ${a}`,
      params,
      response: { 204: { type: 'null', description: 'Deleted' }, ...errorResponses },
    }),
    handler: handleDelete,
  },
];

function settingsOf(k: KindRoutes, o: OperationRoute): RouteSettings {
  const { d, keys } = k;
  if (!o.write) return { permission: d.readPermission, keys };
  return { permission: d.writePermission, keys, audit: { resourceType: d.kind, action: `${d.kind}.${o.op}` } };
}

/** The schema of one operation on one base; null when the strict spec leaves the operation out. */
function schemaOf(k: KindRoutes, base: Base, o: OperationRoute, strict: boolean): Record<string, unknown> | null {
  const { d } = k;
  const extension = base.extension || !d.specOperations.includes(o.op);
  if (strict && extension) return null;
  const params = {
    type: 'object',
    properties: {
      ...(base.path.includes(':id') ? { id: { type: 'string', description: 'Project id' } } : {}),
      ...(o.one ? { resourceId: { type: 'string', description: `${d.title} id` } } : {}),
    },
  };
  return {
    tags: [base.extension ? UNPREFIXED_TAG : d.title],
    operationId: `${o.op}_${d.kind}${base.extension ? '_unprefixed' : ''}`,
    ...(extension ? { 'x-extension': true } : {}),
    ...o.schema(k, params),
  };
}

/** The generic routes of a kind (list, create, get, update, delete, as it declares), on each of its bases. */
export function registerKindRoutes(app: FastifyInstance, ctx: ServiceContext, d: KindDescriptor): void {
  const k = kindRoutes(ctx, d);
  const strict = ctx.options.strictSpec;
  const caps = capsBeforeValidation(d);
  for (const base of basesOf(d)) {
    if (strict && base.extension) continue;
    for (const o of OPERATIONS) {
      if (!d.operations.includes(o.op)) continue;
      const schema = schemaOf(k, base, o, strict);
      if (!schema) continue;
      app.route({
        method: o.method,
        url: o.one ? `${base.path}/:resourceId` : base.path,
        config: { settings: settingsOf(k, o) },
        ...(caps && (o.op === 'create' || o.op === 'update') && { preValidation: caps }),
        schema,
        handler: (req, reply) => o.handler(k, req, reply),
      });
    }
  }
}
