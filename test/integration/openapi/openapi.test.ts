import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { startTestService, type TestService } from '../../support/service.js';
import { API_ERROR_CODES } from '../../../src/kinds/errors.js';

/**
 * The machine-readable description at /api/docs/openapi.json (spec section 1) against the
 * endpoint tables of spec section 4, plus an offline sanity check of the document itself.
 */

/** Spec section 4, table by table, as the spec writes it. */
const SPEC_OPERATIONS = [
  // Authentication endpoints
  'POST /auth/login',
  'POST /auth/refresh',
  'GET /auth/sso/{provider_id}/login',
  'GET /auth/google/login',
  // Projects
  'GET /projects',
  'POST /projects',
  'GET /projects/{id}',
  'PATCH /projects/{id}',
  'DELETE /projects/{id}',
  // Connectors
  'GET /projects/{id}/connectors',
  'POST /projects/{id}/connectors',
  'GET /projects/{id}/connectors/{connectorId}',
  'PATCH /projects/{id}/connectors/{connectorId}',
  'DELETE /projects/{id}/connectors/{connectorId}',
  'POST /projects/{id}/connectors/{connectorId}/test',
  'POST /projects/{id}/connectors/{connectorId}/sync',
  'GET /projects/{id}/connectors/{connectorId}/runs',
  'GET /projects/{id}/connectors/{connectorId}/schema',
  // Infrastructure
  'GET /projects/{id}/infrastructure',
  'POST /projects/{id}/infrastructure',
  'GET /projects/{id}/infrastructure/{resourceId}',
  'PATCH /projects/{id}/infrastructure/{resourceId}',
  'DELETE /projects/{id}/infrastructure/{resourceId}',
  'POST /projects/{id}/infrastructure/plan',
  'POST /projects/{id}/infrastructure/apply',
  // Transformations
  'GET /projects/{id}/dbt-projects',
  'POST /projects/{id}/dbt-projects',
  'GET /projects/{id}/dbt-projects/{dbtId}',
  'POST /projects/{id}/dbt-projects/{dbtId}/run',
  'GET /projects/{id}/dbt-projects/{dbtId}/runs',
  'GET /projects/{id}/dbt-projects/{dbtId}/models',
  'GET /projects/{id}/dbt-projects/{dbtId}/lineage',
  // Pipelines
  'GET /projects/{id}/pipelines',
  'POST /projects/{id}/pipelines',
  'GET /projects/{id}/pipelines/{pipelineId}',
  'PATCH /projects/{id}/pipelines/{pipelineId}',
  'DELETE /projects/{id}/pipelines/{pipelineId}',
  'POST /projects/{id}/pipelines/{pipelineId}/run',
  'GET /projects/{id}/pipelines/{pipelineId}/runs',
  'GET /projects/{id}/pipelines/{pipelineId}/runs/{runId}',
  // Monitoring
  'GET /projects/{id}/alerts',
  'POST /projects/{id}/alerts/{alertId}/acknowledge',
  'POST /projects/{id}/alerts/{alertId}/resolve',
  'GET /projects/{id}/alert-rules',
  'POST /projects/{id}/alert-rules',
  'GET /projects/{id}/notification-channels',
  'POST /projects/{id}/notification-channels',
  'POST /projects/{id}/notification-channels/{channelId}/test',
  'GET /projects/{id}/escalation-policies',
  'POST /projects/{id}/escalation-policies',
  // Governance
  'GET /projects/{id}/classifications',
  'POST /projects/{id}/classifications',
  'GET /projects/{id}/masking-policies',
  'POST /projects/{id}/masking-policies',
  'GET /projects/{id}/audit-logs',
  // Users (tenant level)
  'GET /users',
  'POST /users',
  'GET /users/{userId}',
  'PATCH /users/{userId}',
  'DELETE /users/{userId}',
];

/**
 * Spec operations not implemented yet (runtime triggers and executions, browser SSO flows).
 * When one is implemented, move it out of here: the test insists this is exactly what is missing.
 */
const PENDING: string[] = [];

/**
 * Section 4: the SSO and Google flows end at a callback whose path is "not shown". The paths are
 * ours, the callbacks are part of the spec's flows, so they are served (without x-extension) even
 * with --strict-spec.
 */
const SPEC_CALLBACKS = [
  'GET /auth/sso/{provider_id}/callback',
  'POST /auth/sso/{provider_id}/callback',
  'GET /auth/google/callback',
  // The end of the spec's "Invite a user" (POST /users): the invited user sets a password.
  'POST /auth/invitations/accept',
];

/** Operations we serve beyond the spec; each must be marked x-extension. Not exhaustive. */
const KNOWN_EXTENSIONS = [
  'GET /projects/{id}/alert-rules/{resourceId}',
  'PATCH /projects/{id}/alert-rules/{resourceId}',
  'DELETE /projects/{id}/alert-rules/{resourceId}',
  'GET /projects/{id}/api-keys',
  'POST /projects/{id}/api-keys',
  'DELETE /projects/{id}/api-keys/{keyId}',
  'GET /connectors',
  'POST /connectors',
  'GET /connectors/{connectorId}',
  'GET /pipelines',
  'GET /alert-rules',
  'GET /projects/{id}/connectors/{connectorId}/runs/{runId}',
  'GET /projects/{id}/dbt-projects/{dbtId}/runs/{runId}',
  'GET /projects/{id}/infrastructure/runs',
  'GET /projects/{id}/infrastructure/runs/{runId}',
  'GET /projects/{id}/notification-channels/{channelId}/deliveries',
  'GET /sso-providers',
  'POST /sso-providers',
  'PATCH /sso-providers/{resourceId}',
  'GET /auth/sso/{provider_id}/saml-metadata',
];

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** `GET /projects/{id}/connectors/{connectorId}` -> `GET /projects/{}/connectors/{}`. */
const normalise = (op: string) => op.replace(/\{[^}]*\}/g, '{}');

type Doc = Record<string, any>;
interface Operation {
  key: string;
  method: string;
  path: string;
  op: Record<string, any>;
  pathItem: Record<string, any>;
}

function operations(doc: Doc): Operation[] {
  const out: Operation[] = [];
  for (const [path, pathItem] of Object.entries<Record<string, any>>(doc.paths ?? {})) {
    for (const method of HTTP_METHODS) {
      if (pathItem[method]) out.push({ key: normalise(`${method.toUpperCase()} ${path}`), method, path, op: pathItem[method], pathItem });
    }
  }
  return out;
}

function byKey(doc: Doc): Map<string, Operation> {
  const map = new Map<string, Operation>();
  for (const o of operations(doc)) {
    // Two paths that only differ in parameter names would make the normalised match ambiguous.
    expect(map.has(o.key), `two operations normalise to ${o.key}`).toBe(false);
    map.set(o.key, o);
  }
  return map;
}

/** Resolves a local JSON pointer ('#/components/schemas/X'); undefined when it does not resolve. */
function resolvePointer(doc: Doc, ref: string): unknown {
  if (!ref.startsWith('#')) return undefined;
  let node: any = doc;
  for (const raw of ref.slice(1).split('/').slice(1)) {
    const part = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (node === null || typeof node !== 'object' || !(part in node)) return undefined;
    node = node[part];
  }
  return node;
}

const deref = (doc: Doc, s: any): any => (s && typeof s.$ref === 'string' ? deref(doc, resolvePointer(doc, s.$ref)) : s);

/** Every object node reachable from `node`, following local $refs (once each). */
function* walk(doc: Doc, node: unknown, seen = new Set<unknown>()): Generator<Record<string, any>> {
  if (node === null || typeof node !== 'object' || seen.has(node)) return;
  seen.add(node);
  if (Array.isArray(node)) {
    for (const v of node) yield* walk(doc, v, seen);
    return;
  }
  const obj = node as Record<string, any>;
  yield obj;
  if (typeof obj.$ref === 'string') yield* walk(doc, resolvePointer(doc, obj.$ref), seen);
  for (const v of Object.values(obj)) yield* walk(doc, v, seen);
}

function allRefs(node: unknown, out: string[] = []): string[] {
  if (node && typeof node === 'object') {
    if (!Array.isArray(node) && typeof (node as any).$ref === 'string') out.push((node as any).$ref);
    for (const v of Object.values(node)) allRefs(v, out);
  }
  return out;
}

/** JSON schemas of an operation: parameters, request bodies, responses. */
function operationSchemas(o: Operation): { where: string; schema: any }[] {
  const out: { where: string; schema: any }[] = [];
  for (const p of [...(o.pathItem.parameters ?? []), ...(o.op.parameters ?? [])])
    if (p.schema) out.push({ where: `parameter ${p.in}:${p.name}`, schema: p.schema });
  for (const [type, media] of Object.entries<any>(o.op.requestBody?.content ?? {}))
    if (media.schema) out.push({ where: `request ${type}`, schema: media.schema });
  for (const [code, resp] of Object.entries<any>(o.op.responses ?? {})) {
    for (const [type, media] of Object.entries<any>(resp.content ?? {}))
      if (media.schema) out.push({ where: `response ${code} ${type}`, schema: media.schema });
  }
  return out;
}

const responseSchemas = (o: Operation) => operationSchemas(o).filter((s) => s.where.startsWith('response '));

const jsonSchema = (o: Operation, code: string) => o.op.responses?.[code]?.content?.['application/json']?.schema;

let svc: TestService;
let doc: Doc;
let ops: Map<string, Operation>;

async function fetchDoc(s: TestService, host = 'localhost'): Promise<Doc> {
  const res = await s.http.call('GET', `https://${host}:${s.port}/api/docs/openapi.json`);
  expect(res.status, res.text).toBe(200);
  expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
  return res.body;
}

beforeAll(async () => {
  svc = await startTestService();
  doc = await fetchDoc(svc);
  ops = byKey(doc);
});
afterAll(() => svc?.close());

describe('OpenAPI document at /api/docs/openapi.json', () => {
  it('is OpenAPI 3.1 and is served without a token, on tenant and non-tenant hosts alike', async () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.info?.title).toEqual(expect.any(String));
    expect(doc.info?.version).toEqual(expect.any(String));
    const t = await svc.tenant();
    const onTenantHost = await fetchDoc(svc, `${t.slug}.localhost`);
    expect(onTenantHost.openapi).toBe(doc.openapi);
    expect(Object.keys(onTenantHost.paths).sort()).toEqual(Object.keys(doc.paths).sort());
    // The servers entry is relative, so the interactive reference calls the host it was loaded from.
    expect(doc.servers?.map((s: { url: string }) => s.url)).toContain('/api/v1');
  });

  it('has every operation of spec section 4 except exactly the known pending ones', () => {
    const spec = SPEC_OPERATIONS.map(normalise);
    expect(new Set(spec).size, 'spec list has duplicates').toBe(spec.length);
    const pending = PENDING.map(normalise);
    for (const p of pending) expect(spec, `pending ${p} is not a spec operation`).toContain(p);
    const missing = spec.filter((k) => !ops.has(k));
    expect(missing.sort(), 'spec operations absent from the document (update PENDING when one is implemented)').toEqual(
      [...pending].sort(),
    );
  });

  it('marks operations outside the spec with x-extension: true and spec operations without it', () => {
    const spec = new Set([...SPEC_OPERATIONS, ...SPEC_CALLBACKS].map(normalise));
    const specMarked = [...ops.values()].filter((o) => spec.has(o.key) && o.op['x-extension'] === true).map((o) => o.key);
    expect(specMarked, 'spec operations carrying x-extension').toEqual([]);
    const unmarked = [...ops.values()].filter((o) => !spec.has(o.key) && o.op['x-extension'] !== true).map((o) => o.key);
    expect(unmarked, 'non-spec operations without x-extension: true').toEqual([]);
    for (const k of KNOWN_EXTENSIONS.map(normalise)) {
      expect(ops.has(k), `${k} is served as an extension`).toBe(true);
      expect(ops.get(k)!.op['x-extension'], k).toBe(true);
    }
  });

  it('declares a bearer security scheme that protects every operation except login, refresh, invitation acceptance and browser sign-in', () => {
    const schemes: Record<string, any> = doc.components?.securitySchemes ?? {};
    const bearer = Object.entries(schemes)
      .filter(([, s]) => s.type === 'http' && String(s.scheme).toLowerCase() === 'bearer')
      .map(([name]) => name);
    expect(bearer.length, 'an http bearer securityScheme').toBeGreaterThan(0);
    const requirementNames = (reqs: Record<string, string[]>[]) => reqs.flatMap((r) => Object.keys(r));
    for (const name of requirementNames(doc.security ?? [])) expect(schemes, `global security names ${name}`).toHaveProperty(name);
    const publicOps: string[] = [];
    for (const o of ops.values()) {
      const effective: Record<string, string[]>[] = o.op.security ?? doc.security ?? [];
      for (const name of requirementNames(effective)) expect(schemes, `${o.key} security names ${name}`).toHaveProperty(name);
      if (effective.length === 0) publicOps.push(o.key);
      else
        expect(
          requirementNames(effective).some((n) => bearer.includes(n)),
          `${o.key} accepts the bearer token`,
        ).toBe(true);
    }
    const browserSignIn = [
      'GET /auth/sso/{}/login',
      'GET /auth/google/login',
      'GET /auth/sso/{}/saml-metadata',
      ...SPEC_CALLBACKS.map(normalise),
    ];
    expect(publicOps.sort()).toEqual(['POST /auth/login', 'POST /auth/refresh', ...browserSignIn].sort());
  });

  it("describes the error envelope with exactly the catalogue's codes (docs/guides/errors.md)", () => {
    const envelopes = Object.values(doc.components?.schemas ?? {}).filter((s: any) => s?.properties?.error?.properties?.code?.enum);
    expect(envelopes).toHaveLength(1);
    expect([...(envelopes[0] as any).properties.error.properties.code.enum].sort()).toEqual([...API_ERROR_CODES].sort());
  });

  it('describes the connector create request with name and connector_type required', () => {
    const create = ops.get(normalise('POST /projects/{id}/connectors'))!;
    const body = deref(doc, create.op.requestBody?.content?.['application/json']?.schema);
    expect(create.op.requestBody?.required).toBe(true);
    expect(body?.required).toEqual(expect.arrayContaining(['name', 'connector_type']));
    expect(Object.keys(deref(doc, body.properties) ?? {})).toEqual(
      expect.arrayContaining(['name', 'connector_type', 'config', 'credentials', 'selected_tables', 'schedule']),
    );
    // The password can be written...
    expect(deref(doc, deref(doc, body.properties.credentials).properties)).toHaveProperty('password');
  });

  it('never has a password under credentials in any connector response schema', () => {
    const connectorOps = [...ops.values()].filter((o) => /\/connectors(\/\{\})?$/.test(o.key));
    expect(connectorOps.length).toBeGreaterThanOrEqual(5);
    let credentialsSeen = 0;
    for (const o of connectorOps) {
      for (const { where, schema } of responseSchemas(o)) {
        for (const node of walk(doc, schema)) {
          const credentials = node.properties && typeof node.properties === 'object' ? node.properties.credentials : undefined;
          if (!credentials) continue;
          credentialsSeen++;
          for (const inner of walk(doc, credentials)) {
            expect(Object.keys(inner), `${o.key} ${where}: credentials must not describe a password`).not.toContain('password');
            if (Array.isArray(inner.required)) expect(inner.required, `${o.key} ${where}`).not.toContain('password');
          }
        }
      }
    }
    // create 201, get 200, patch 200, list 200 (items) — project-scoped and unprefixed.
    expect(credentialsSeen).toBeGreaterThanOrEqual(4);
    const created = deref(doc, jsonSchema(ops.get(normalise('POST /projects/{id}/connectors'))!, '201'));
    expect(Object.keys(deref(doc, created.properties.credentials).properties)).toContain('username');
  });

  it('describes no write-only (x-secret) property in any response', () => {
    const leaks: string[] = [];
    for (const o of ops.values()) {
      for (const { where, schema } of responseSchemas(o)) {
        for (const node of walk(doc, schema)) {
          for (const [name, prop] of Object.entries<any>(node.properties && typeof node.properties === 'object' ? node.properties : {})) {
            if (prop && prop['x-secret'] === true) leaks.push(`${o.key} ${where}: ${name}`);
          }
        }
      }
    }
    expect(leaks).toEqual([]);
  });

  it('passes an offline structural check: refs resolve, operations have responses, path parameters match, schemas compile', () => {
    // Every $ref in the document resolves locally.
    const refs = allRefs(doc);
    const dangling = refs.filter((r) => resolvePointer(doc, r) === undefined);
    expect(dangling, 'unresolvable $ref').toEqual([]);
    // Component names are meaningful (not generated def-N).
    for (const name of Object.keys(doc.components?.schemas ?? {})) {
      expect(name, 'component schema names').toMatch(/^[A-Za-z0-9._-]+$/);
      expect(name).not.toMatch(/^def-\d+$/);
    }

    const operationIds = new Map<string, string>();
    const problems: string[] = [];
    for (const path of Object.keys(doc.paths)) if (!path.startsWith('/')) problems.push(`path ${path} does not start with /`);
    for (const o of ops.values()) {
      const where = `${o.method.toUpperCase()} ${o.path}`;
      const responses = Object.entries<any>(o.op.responses ?? {});
      if (responses.length === 0) problems.push(`${where}: no responses`);
      // Browser sign-in starts with a redirect (302), which is its success.
      if (!responses.some(([code]) => /^[23](\d\d|XX)$/.test(code))) problems.push(`${where}: no 2xx or 3xx response`);
      for (const [code, resp] of responses) {
        const r = deref(doc, resp);
        if (!/^([1-5]\d\d|[1-5]XX|default)$/.test(code)) problems.push(`${where}: bad response code ${code}`);
        if (typeof r?.description !== 'string') problems.push(`${where} ${code}: response without description`);
      }
      if (o.op.operationId !== undefined) {
        if (operationIds.has(o.op.operationId))
          problems.push(`${where}: operationId ${o.op.operationId} also used by ${operationIds.get(o.op.operationId)}`);
        operationIds.set(o.op.operationId, where);
      }
      // Path template parameters and declared path parameters match one to one, all required.
      const params = [...(o.pathItem.parameters ?? []), ...(o.op.parameters ?? [])].map((p) => deref(doc, p));
      const seen = new Set<string>();
      for (const p of params) {
        if (!p?.name || !['path', 'query', 'header', 'cookie'].includes(p.in))
          problems.push(`${where}: malformed parameter ${JSON.stringify(p)}`);
        const id = `${p.in}:${p.name}`;
        if (seen.has(id)) problems.push(`${where}: parameter ${id} declared twice`);
        seen.add(id);
        if (p.in === 'path' && p.required !== true) problems.push(`${where}: path parameter ${p.name} not required`);
        if (!p.schema && !p.content) problems.push(`${where}: parameter ${id} without schema`);
      }
      const templated = [...o.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]).sort();
      const declared = params
        .filter((p) => p.in === 'path')
        .map((p) => p.name)
        .sort();
      if (JSON.stringify(templated) !== JSON.stringify(declared))
        problems.push(`${where}: path template {${templated}} vs path parameters {${declared}}`);
      if (o.op.requestBody && !deref(doc, o.op.requestBody).content) problems.push(`${where}: requestBody without content`);
    }
    expect(problems).toEqual([]);

    // Every schema is a valid JSON Schema 2020-12 (the OpenAPI 3.1 dialect) and compiles,
    // with component $refs rewired to a registered components schema.
    const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
    const rewire = (s: unknown): unknown =>
      JSON.parse(JSON.stringify(s), (k, v) =>
        k === '$ref' && typeof v === 'string' && v.startsWith('#/components/schemas/')
          ? `urn:openapi:components#/$defs/${v.slice('#/components/schemas/'.length)}`
          : v,
      );
    ajv.addSchema({ $id: 'urn:openapi:components', $defs: rewire(doc.components?.schemas ?? {}) as object });
    const invalid: string[] = [];
    let compiled = 0;
    for (const o of ops.values()) {
      for (const { where, schema } of operationSchemas(o)) {
        try {
          ajv.compile(rewire(schema) as object);
          compiled++;
        } catch (e) {
          invalid.push(`${o.key} ${where}: ${(e as Error).message}`);
        }
      }
    }
    expect(invalid).toEqual([]);
    expect(compiled).toBeGreaterThan(ops.size);
  });
});

describe('OpenAPI document with strictSpec', () => {
  it('has no x-extension operation and exactly the implemented spec operations', async () => {
    const strict = await startTestService({ strictSpec: true });
    try {
      const strictDoc = await fetchDoc(strict);
      expect(strictDoc.openapi).toMatch(/^3\.1\.\d+$/);
      const strictOps = [...byKey(strictDoc).values()];
      expect(strictOps.filter((o) => o.op['x-extension'] !== undefined).map((o) => o.key)).toEqual([]);
      const pending = new Set(PENDING.map(normalise));
      const implemented = [...SPEC_OPERATIONS, ...SPEC_CALLBACKS].map(normalise).filter((k) => !pending.has(k));
      expect(strictOps.map((o) => o.key).sort()).toEqual(implemented.sort());
      expect(allRefs(strictDoc).filter((r) => resolvePointer(strictDoc, r) === undefined)).toEqual([]);
    } finally {
      await strict.close();
    }
  });
});
