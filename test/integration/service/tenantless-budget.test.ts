import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
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
    for (const path of [
      '/api/docs/openapi.json',
      '/terraform/providers/registry.terraform.io/dataplatform/dataplatform/index.json',
      // Needs no token here (no --metrics-token); a scraper every 15 s spends 4 of the 600 a minute.
      '/metrics',
    ]) {
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

  it("a load balancer's probes are not counted (the budget is kept in the database they check): /healthz, and /readyz with one check a second", async () => {
    for (const path of ['/healthz', '/readyz']) {
      const answers = [];
      for (let i = 0; i <= 2 * BUDGET; i++) answers.push(await svc.http.call('GET', `${root}${path}`));
      expect(answers.map((r) => r.status)).toEqual(Array(2 * BUDGET + 1).fill(200));
    }
    expect((await svc.http.call('GET', `${root}/readyz`)).body).toEqual({ status: 'ready' });
  });

  it('keys the budget by the TCP peer: X-Forwarded-For from a client no proxy setting trusts changes nothing', async () => {
    const answers = [];
    for (let i = 0; i <= BUDGET; i++)
      answers.push(await svc.http.call('GET', `${root}/api/docs/json`, { headers: { 'X-Forwarded-For': `203.0.113.${i + 1}` } }));
    expect(answers.slice(0, BUDGET).map((r) => r.status)).toEqual(Array(BUDGET).fill(200));
    expectError(answers[BUDGET], 429, 'rate_limited', /from this address/);
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

describe('the per-address budget behind a trusted proxy', () => {
  let svc: TestService;
  let root: string;

  beforeAll(async () => {
    // The test client connects from loopback: here that is the proxy, and X-Forwarded-For names the client.
    svc = await startTestService({ anonymousRateLimit: BUDGET, trustProxy: '127.0.0.1,::1' });
    root = svc.url((await svc.tenant()).slug).replace(/\/api\/v1$/, '');
  });
  afterAll(() => svc?.close());

  it("is per client the proxy names, so one client behind it does not use up the others' budget", async () => {
    const from = (client: string) => svc.http.call('GET', `${root}/api/docs/openapi.json`, { headers: { 'X-Forwarded-For': client } });
    for (let i = 0; i < BUDGET; i++) expect((await from('203.0.113.7')).status).toBe(200);
    expectError(await from('203.0.113.7'), 429, 'rate_limited', /from this address/);
    expect((await from('203.0.113.8')).status).toBe(200);
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

  it('are serialised once: later requests, on any host, do not ask for the document again', async () => {
    const other = await svc.tenant();
    const roots = [t.slug, other.slug].map((slug) => svc.url(slug).replace(/\/api\/v1$/, ''));
    const paths = ['/api/docs/openapi.json', '/api/docs/json', '/api/docs/yaml'];
    for (const path of paths) expect((await svc.http.call('GET', `${roots[0]}${path}`)).status).toBe(200);
    // @fastify/swagger keeps the document object; what cost 4-8 ms (JSON) and 128 ms (YAML) was serialising it per request.
    const asked = vi.spyOn(svc.service.app, 'swagger');
    try {
      for (const r of roots) for (const path of paths) expect((await svc.http.call('GET', `${r}${path}`)).status).toBe(200);
      expect(asked).not.toHaveBeenCalled();
    } finally {
      asked.mockRestore();
    }
  });

  it('keep a title with quotes, colons and a line break whole, in JSON and YAML', async () => {
    const odd = await svc.service.ctx.tenants.create('odd-title', 'Acme: "data" #1\nsecond line');
    const root = svc.url(odd.slug).replace(/\/api\/v1$/, '');
    const title = 'Data Platform Management API \u2014 Acme: "data" #1\nsecond line';
    expect((await svc.http.call('GET', `${root}/api/docs/json`)).body.info.title).toBe(title);
    expect(parseYaml((await svc.http.call('GET', `${root}/api/docs/yaml`)).text).info.title).toBe(title);
  });
});
