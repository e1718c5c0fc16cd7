import { describe, expect, test } from 'vitest';
import type { FastifyError } from 'fastify';
import { assertPermission, auditEntry, bearerToken, redactUrl, requestLevel, toApiError } from '../../../src/service/request-pipeline.js';
import { ApiError } from '../../../src/service/errors.js';
import { MAX_FIELD_ERRORS, capFieldErrors } from '../../../src/kinds/validator.js';
import type { Actor } from '../../../src/service/auth/actor.js';
import type { Tenant } from '../../../src/service/tenants.js';

const outcome = (fn: () => unknown) => {
  try {
    return `ok: ${fn()}`;
  } catch (err) {
    return `${(err as ApiError).code} ${(err as ApiError).status}: ${(err as Error).message}`;
  }
};
const fastifyError = (fields: Partial<FastifyError> & { validationContext?: string }) =>
  Object.assign(new Error(fields.message ?? 'boom'), fields) as FastifyError;

describe('request log lines', () => {
  test('credentials in query parameters are redacted, whatever their case and position', () => {
    expect(redactUrl('/api/v1/ws/alerts?token=dp_secret')).toBe('/api/v1/ws/alerts?token=[redacted]');
    expect(redactUrl('/api/v1/auth/sso/p/callback?code=abc&state=xyz&iss=https://idp')).toBe(
      '/api/v1/auth/sso/p/callback?code=[redacted]&state=[redacted]&iss=https://idp',
    );
    expect(redactUrl('/x?TOKEN=a&other=1')).toBe('/x?TOKEN=[redacted]&other=1');
    expect(redactUrl('/x?mytoken=a')).toBe('/x?mytoken=a');
  });

  test('successes are debug, client errors info, server errors error', () => {
    expect([200, 204, 302, 399, 400, 404, 429, 499, 500, 503].map(requestLevel)).toEqual([
      'debug',
      'debug',
      'debug',
      'debug',
      'info',
      'info',
      'info',
      'info',
      'error',
      'error',
    ]);
  });
});

describe('the error envelope of what was thrown', () => {
  test('an ApiError is answered as it is', () => {
    const err = new ApiError('conflict', 'taken');
    expect(toApiError(err)).toBe(err);
  });

  test('schema validation failures name the part and the fields', () => {
    const err = fastifyError({
      validationContext: 'querystring',
      validation: [{ instancePath: '/limit', message: 'must be <= 100', keyword: 'maximum', params: {}, schemaPath: '' }] as never,
    });
    const api = toApiError(err);
    expect([api.code, api.status]).toEqual(['validation_error', 400]);
    expect(api.message).toMatch(/^Invalid querystring: /);
    expect(api.details?.length).toBe(1);
  });

  test('schema validation failures list at most MAX_FIELD_ERRORS fields and say how many errors were left out', () => {
    const items = (n: number, from = 0) =>
      Array.from({ length: n }, (_, i) => ({
        instancePath: `/selected_tables/${from + i}`,
        message: 'must be string',
        keyword: 'type',
        params: { type: 'string' },
        schemaPath: '#/properties/selected_tables/items/type',
      }));
    const wrapper = { instancePath: '', message: 'must match "then" schema', keyword: 'if', params: {}, schemaPath: '#/if' };
    const api = toApiError(fastifyError({ validationContext: 'body', validation: [...items(100_000), wrapper] as never }));
    expect([api.code, api.status]).toEqual(['validation_error', 400]);
    expect(api.details).toHaveLength(MAX_FIELD_ERRORS);
    expect(api.details![0]).toEqual({ field: 'selected_tables[0]', message: 'must be string' });
    expect(api.details![MAX_FIELD_ERRORS - 1].field).toBe(`selected_tables[${MAX_FIELD_ERRORS - 1}]`);
    // Wrapper keywords (if, allOf) only repeat their branches' errors: not counted.
    expect(api.message).toMatch(/^Invalid body: selected_tables\[0\] must be string; /);
    expect(api.message).toMatch(/; and 99,900 more errors \(only the first 100 fields are listed\)$/);
    expect(api.message.length).toBeLessThan(10_000);

    // At the cap exactly: nothing left out, nothing said.
    const exact = toApiError(fastifyError({ validationContext: 'body', validation: items(MAX_FIELD_ERRORS) as never }));
    expect(exact.details).toHaveLength(MAX_FIELD_ERRORS);
    expect(exact.message).not.toMatch(/more error/);
  });

  test('capped field errors still join the messages of a field listed, and stop at the first field past the cap', () => {
    const e = (path: string, keyword: string, message: string) => ({ instancePath: path, keyword, message, params: {}, schemaPath: '' });
    const found = capFieldErrors(
      [
        e('/a', 'minLength', 'must NOT have fewer than 1 characters'),
        e('/b', 'pattern', 'must match pattern'),
        e('/a', 'pattern', 'must match pattern'),
        e('/c', 'pattern', 'must match pattern'),
        e('/a', 'maxLength', 'too long'),
        e('', 'allOf', 'must match'),
      ] as never,
      2,
    );
    expect(found.details).toEqual([
      { field: 'a', message: 'must NOT have fewer than 1 characters; must match pattern' },
      { field: 'b', message: 'must match pattern' },
    ]);
    // /c and everything after it: counted (the wrapper aside), not mapped.
    expect(found.omitted).toBe(2);
  });

  test("Fastify's own refusals: body too large (413), not JSON (415), not found, malformed (400)", () => {
    const big = toApiError(fastifyError({ code: 'FST_ERR_CTP_BODY_TOO_LARGE', statusCode: 413 }));
    expect([big.code, big.status, big.message]).toEqual(['validation_error', 413, 'Request body is larger than the limit of this service']);
    const media = toApiError(fastifyError({ code: 'FST_ERR_CTP_INVALID_MEDIA_TYPE', statusCode: 415 }));
    expect([media.status, media.details]).toEqual([415, [{ field: 'Content-Type', message: 'must be application/json' }]]);
    const missing = toApiError(fastifyError({ statusCode: 404 }));
    expect([missing.code, missing.message]).toEqual(['resource_not_found', 'Not found']);
    const malformed = toApiError(fastifyError({ statusCode: 400, message: 'Unexpected end' }));
    expect([malformed.status, malformed.message]).toEqual([400, 'Malformed request: Unexpected end']);
  });

  test('anything else is an internal error that says nothing of the cause', () => {
    const api = toApiError(new Error('connection refused to 10.0.0.5'));
    expect([api.code, api.status, api.message]).toEqual([
      'internal_error',
      500,
      'Internal error; quote the X-Request-Id when reporting it',
    ]);
  });
});

describe('admission', () => {
  test('a bearer token, or a 401 that says what is wrong', () => {
    expect(bearerToken('Bearer abc.def')).toBe('abc.def');
    expect(bearerToken('bearer   abc  ')).toBe('abc');
    expect(outcome(() => bearerToken(undefined))).toBe('unauthorized 401: Missing Authorization header with a Bearer token');
    expect(outcome(() => bearerToken('Basic dXNlcg=='))).toBe('unauthorized 401: Authorization header must be "Bearer <token>"');
    expect(outcome(() => bearerToken('Bearer a b'))).toBe('unauthorized 401: Authorization header must be "Bearer <token>"');
  });

  test('a permission below the route level is a 403 naming both', () => {
    const reader: Actor = { type: 'user', id: 'usr_1', name: 'r', tenantId: 'ten_1', level: 'read-only' };
    const key: Actor = { type: 'api_key', id: 'key_1', name: 'k', tenantId: 'ten_1', level: 'read-write', projectId: 'prj_1' };
    expect(outcome(() => assertPermission(reader, undefined))).toBe('ok: undefined');
    expect(outcome(() => assertPermission(reader, 'read-only'))).toBe('ok: undefined');
    expect(outcome(() => assertPermission(reader, 'read-write'))).toBe(
      'forbidden 403: This operation needs read-write permission; the user has read-only',
    );
    expect(outcome(() => assertPermission(key, 'admin'))).toBe(
      'forbidden 403: This operation needs admin permission; the API key has read-write',
    );
  });
});

describe('audit entries', () => {
  const tenant = { id: 'ten_1' } as Tenant;
  const audit = { resourceType: 'connector', action: 'connector.create' };

  test("the handler's details win over the actor and the path", () => {
    const entry = auditEntry(
      {
        id: 'req_1',
        tenant,
        params: { id: 'prj_path', resourceId: 'con_path' },
        actor: { type: 'user', id: 'usr_1', name: 'a@x', tenantId: 'ten_1', level: 'admin' },
        auditDetails: { projectId: 'prj_d', resourceId: 'con_d', resourceName: 'orders', diff: { a: { before: 1, after: 2 } } },
      },
      audit,
      201,
      '2026-01-01T00:00:00.000Z',
    );
    expect(entry).toEqual({
      tenantId: 'ten_1',
      projectId: 'prj_d',
      actor: { type: 'user', id: 'usr_1', name: 'a@x' },
      action: 'connector.create',
      resourceType: 'connector',
      resourceId: 'con_d',
      resourceName: 'orders',
      requestId: 'req_1',
      statusCode: 201,
      diff: { a: { before: 1, after: 2 } },
      timestamp: '2026-01-01T00:00:00.000Z',
    });
  });

  test("without details: an API key's project, else the path's; an anonymous actor", () => {
    const key: Actor = { type: 'api_key', id: 'key_1', name: 'ci', tenantId: 'ten_1', level: 'admin', projectId: 'prj_key' };
    const byKey = auditEntry({ id: 'r', tenant, params: { id: 'prj_path' }, actor: key }, audit, 403, 't');
    expect([byKey.projectId, byKey.actor, byKey.resourceId, byKey.resourceName, byKey.diff]).toEqual([
      'prj_key',
      { type: 'api_key', id: 'key_1', name: 'ci' },
      null,
      null,
      null,
    ]);
    const anonymous = auditEntry({ id: 'r', tenant, params: { id: 'prj_path', resourceId: 'con_1' } }, audit, 401, 't');
    expect([anonymous.projectId, anonymous.actor, anonymous.resourceId]).toEqual([
      'prj_path',
      { type: 'anonymous', id: null, name: null },
      'con_1',
    ]);
    expect(auditEntry({ id: 'r', tenant, params: {} }, audit, 401, 't').projectId).toBeNull();
  });
});
