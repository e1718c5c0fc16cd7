import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { expectError } from '../auth/helpers.js';

/**
 * Routes served on any host to anyone (the API docs, the Terraform provider mirror, /metrics) and
 * paths no route has: no tenant, no token, but the per-address budget of anonymous requests. The
 * docs document cost 4-8 ms of CPU a request with no limit at all; a path no route had was a 401
 * without a token (said nothing about the path) and cost nothing to flood.
 */
const BUDGET = 5;

describe('requests on any host, and to no route', () => {
  let svc: TestService;
  let t: TestTenant;
  let other: TestTenant;
  /** The service's root on the tenant's host (the docs live beside /api/v1). */
  let root: string;

  beforeAll(async () => {
    svc = await startTestService({ anonymousRateLimit: BUDGET });
    [t, other] = [await svc.tenant(), await svc.tenant()];
    root = svc.url(t.slug).replace(/\/api\/v1$/, '');
  });
  afterAll(() => svc?.close());

  it('gives the docs and the provider mirror a budget per address, and leaves the tenants their own', async () => {
    for (const path of ['/api/docs/openapi.json', '/terraform/providers/registry.terraform.io/dataplatform/dataplatform/index.json']) {
      const answers = [];
      for (let i = 0; i <= BUDGET; i++) answers.push(await svc.http.call('GET', `${root}${path}`));
      expect(answers.slice(0, BUDGET).map((r) => r.status)).toEqual(Array(BUDGET).fill(200));
      const refused = answers[BUDGET];
      expectError(refused, 429, 'rate_limited', /from this address/);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    }
    // Signed-in requests count against their tenant's quota, not the address's.
    for (let i = 0; i <= BUDGET; i++) await svc.ok(other, 'GET', '/projects');
  });

  it('answers a path no route has with 404, with or without a token, within the same kind of budget', async () => {
    const unknown = svc.url(t.slug, '/no-such-thing');
    expectError(await svc.http.call('GET', unknown), 404, 'resource_not_found', /No route GET \/api\/v1\/no-such-thing/);
    expectError(await svc.http.call('GET', unknown, { token: t.adminToken }), 404, 'resource_not_found');
    // A method the login route does not have.
    expectError(await svc.http.call('GET', svc.url(t.slug, '/auth/login')), 404, 'resource_not_found', /No route GET/);
    const answers = [];
    for (let i = 0; i < BUDGET; i++) answers.push(await svc.http.call('DELETE', svc.url(t.slug, `/nothing/${i}`)));
    expect(answers.slice(0, BUDGET - 3).map((r) => r.status)).toEqual(Array(BUDGET - 3).fill(404));
    expectError(answers[BUDGET - 1], 429, 'rate_limited', /from this address/);
    // A real route is not affected.
    expect((await svc.ok(t, 'GET', '/projects')).data).toBeDefined();
  });
});

describe('the OpenAPI documents', () => {
  let svc: TestService;
  let t: TestTenant;

  beforeAll(async () => {
    svc = await startTestService();
    t = await svc.tenant();
  });
  afterAll(() => svc?.close());

  it('are the same document: /openapi.json on any host, /json and /yaml titled with the tenant', async () => {
    const root = svc.url(t.slug).replace(/\/api\/v1$/, '');
    const plain = await svc.http.call('GET', `${root}/api/docs/openapi.json`);
    expect(plain.status).toBe(200);
    expect(plain.headers['content-type']).toMatch(/^application\/json/);
    expect((await svc.http.call('GET', `${root}/api/docs/openapi.json`)).text).toBe(plain.text);
    expect(plain.body.info.title).toBe('Data Platform Management API');

    const json = await svc.http.call('GET', `${root}/api/docs/json`);
    const yaml = await svc.http.call('GET', `${root}/api/docs/yaml`);
    expect(yaml.headers['content-type']).toMatch(/^application\/x-yaml/);
    expect(json.body.info.title).toBe(`Data Platform Management API \u2014 ${t.slug}`);
    expect(parseYaml(yaml.text)).toEqual(json.body);
    expect({ ...json.body, info: { ...json.body.info, title: plain.body.info.title } }).toEqual(plain.body);
    expect(Object.keys(json.body.paths).length).toBeGreaterThan(50);
  });

  it('keep a title with quotes, colons and a line break whole, in JSON and YAML', async () => {
    const odd = await svc.service.ctx.tenants.create('odd-title', 'Acme: "data" #1\nsecond line');
    const root = svc.url(odd.slug).replace(/\/api\/v1$/, '');
    const title = 'Data Platform Management API \u2014 Acme: "data" #1\nsecond line';
    expect((await svc.http.call('GET', `${root}/api/docs/json`)).body.info.title).toBe(title);
    expect(parseYaml((await svc.http.call('GET', `${root}/api/docs/yaml`)).text).info.title).toBe(title);
  });
});
