import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxy, type Fault } from '../../support/fault-proxy.js';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import { haveTerraform, PROVIDER_BLOCK, TerraformWorkspace } from './harness.js';

/**
 * 429s and 5xx between the provider and the service (a fault-injecting HTTPS proxy, the
 * service's own certificates): waited out and retried where that is safe, a create never
 * blindly re-sent, and where the provider gives up, a diagnostic that says what failed and
 * what to do. Nothing is ever duplicated; the objects are counted through the API.
 */
describe.skipIf(testStore() === 'postgres' || !haveTerraform)('provider under 429 and 5xx (real terraform)', () => {
  let svc: TestService;
  let t: TestTenant;
  let proxy: FaultProxy;
  let ws: TerraformWorkspace;
  let projectId: string;
  const NAMES = ['ch-0', 'ch-1', 'ch-2', 'ch-3'];
  const api = <T = any>(method: string, path: string, body?: unknown, expected?: number) => svc.ok<T>(t, method, path, body === undefined ? {} : { body }, expected);
  const channelNames = async () => (await api<{ data: any[] }>('GET', `/projects/${projectId}/notification-channels?limit=100`)).data.map((c) => c.name as string).sort();
  const CHANNELS = /^\/api\/v1\/projects\/[^/]+\/notification-channels$/;
  const seen = (method: string, pattern: RegExp) => proxy.seen.filter((r) => r.method === method && pattern.test(r.path.split('?')[0]));
  /** Terraform wraps a diagnostic's detail at 78 columns. */
  const flat = (out: string) => out.replace(/\s+/g, ' ');
  const RATE_LIMITED: Fault = { status: 429, headers: { 'retry-after': '1' }, body: { error: { code: 'rate_limited', message: 'slow down' } } };
  const UNAVAILABLE: Fault = { status: 503, body: { error: { code: 'internal_error', message: 'injected fault' } } };

  const channel = (resource: string, name: string) =>
    `\nresource "dataplatform_notification_channel" "${resource}" {\n  project_id = dataplatform_project.p.id\n  name       = "${name}"\n  type       = "email"\n  config     = { email_addresses = ["${name}@example.com"] }\n}\n`;

  beforeAll(async () => {
    svc = await startTestService();
    t = await svc.tenant();
    proxy = await FaultProxy.start(svc);
    ws = await TerraformWorkspace.create(svc, t, { endpoint: `https://${t.slug}.localhost:${proxy.port}` });
    ws.write('main.tf', `${PROVIDER_BLOCK}\nresource "dataplatform_project" "p" {\n  name = "faults"\n}\n${NAMES.map((n, i) => channel(`c${i}`, n)).join('')}`);
    await ws.init();
  }, 60_000);

  afterAll(async () => {
    await proxy?.close();
    await svc?.close();
    ws?.close();
  });

  it('waits out 429s, retries GETs answered 503, never re-sends a create answered 503; the next apply converges without duplicates', { timeout: 120_000 }, async () => {
    // First apply: the first request of every method and path is rate limited (Retry-After: 1);
    // the second create of a channel gets a 503 without reaching the service.
    proxy.inject(({ method, path, n }) => (n === 1 ? RATE_LIMITED : method === 'POST' && CHANNELS.test(path) && n === 2 ? UNAVAILABLE : 'forward'));
    const first = await ws.tf(['apply', '-auto-approve', '-input=false'], [1]);
    projectId = (await api<{ data: any[] }>('GET', '/projects')).data.find((p) => p.name === 'faults').id;
    const created = await channelNames();
    expect(created).toHaveLength(3);
    const missing = NAMES.find((n) => !created.includes(n))!;
    // Every 429 was waited out and sent again, the 503'd create was not: 4 creates + 1 retry.
    const posts = seen('POST', CHANNELS);
    expect(posts.map((r) => r.fault).sort()).toEqual(['forward', 'forward', 'forward', JSON.stringify(RATE_LIMITED), JSON.stringify(UNAVAILABLE)].sort());
    expect(seen('POST', /^\/api\/v1\/projects$/).map((r) => r.fault)).toEqual([JSON.stringify(RATE_LIMITED), 'forward']);
    // What failed, and what to do.
    expect(first.out).toContain(`Error: Creating notification_channel name="${missing}" in project ${projectId} may or may not have been applied: injected fault (HTTP 503 internal_error on POST /projects/{id}/notification-channels`);
    expect(first.out.match(/^Error: /gm)).toHaveLength(1);
    const out = flat(first.out);
    expect(out).toContain('It was not re-sent; check the current state before trying again');
    expect(out).toContain('Terraform did not record this notification_channel. Run terraform apply again: if the first request did create it, the service refuses a second notification_channel with the same name (409 conflict), so nothing is duplicated');
    expect(out).toContain(`terraform import <resource address> ${projectId}/${missing}`);

    // Second apply: refresh reads under 429s and 503s on GETs (each retried), then the missing create.
    proxy.inject(({ method, n }) => (n === 1 ? RATE_LIMITED : method === 'GET' && n === 2 ? UNAVAILABLE : 'forward'));
    expect(await ws.apply()).toContain('Apply complete! Resources: 1 added, 0 changed, 0 destroyed.');
    expect(proxy.seen.filter((r) => r.method === 'GET' && r.fault === JSON.stringify(UNAVAILABLE)).length).toBeGreaterThan(0);
    expect(proxy.seen.filter((r) => r.fault === JSON.stringify(RATE_LIMITED)).length).toBeGreaterThan(1);
    expect(await channelNames()).toEqual(NAMES);
    expect((await api<{ data: any[] }>('GET', '/projects')).data.filter((p) => p.name === 'faults')).toHaveLength(1);
    proxy.inject(() => 'forward');
    expect((await ws.plan()).code).toBe(0);
  });

  it('a create that reached the service but was answered 503: refused as a duplicate next time, with the import that fixes it', { timeout: 120_000 }, async () => {
    ws.write('late.tf', channel('late', 'late'));
    proxy.inject(({ method, path }) => (method === 'POST' && CHANNELS.test(path) ? { forwardThenStatus: 503 } : 'forward'));
    const first = await ws.tf(['apply', '-auto-approve', '-input=false'], [1]);
    expect(first.out).toContain('Error: Creating notification_channel name="late"');
    expect(await channelNames()).toEqual([...NAMES, 'late'].sort());

    proxy.inject(() => 'forward');
    const second = await ws.tf(['apply', '-auto-approve', '-input=false'], [1]);
    expect(second.out).toContain('Error: A notification channel with name "late" already exists in this project');
    expect(flat(second.out)).toContain('import it with terraform import <resource address> <project_id>/<name>');
    expect(await channelNames()).toEqual([...NAMES, 'late'].sort());

    const imported = await ws.tf(['import', '-input=false', 'dataplatform_notification_channel.late', `${projectId}/late`]);
    expect(imported.out).toContain('Import successful!');
    expect((await ws.plan()).code).toBe(0);
    expect(await channelNames()).toEqual([...NAMES, 'late'].sort());
  });

  it('gives up on endless 429s and 503s with what to do', { timeout: 120_000 }, async () => {
    // A Retry-After longer than a call may wait fails at once.
    proxy.inject(({ method, path }) => (method === 'GET' && !path.startsWith('/api/v1/auth/') ? { status: 429, headers: { 'retry-after': '3600' }, body: { error: { code: 'rate_limited', message: 'Rate limit exceeded' } } } : 'forward'));
    const limited = await ws.tf(['plan', '-input=false'], [1]);
    expect(limited.out).toContain('Error: Rate limit exceeded');
    expect(flat(limited.out)).toContain('Rate limited: the service kept answering 429 Too Many Requests beyond what the provider waits out. Try again later, or lower -parallelism');

    proxy.inject(({ method, path }) => (method === 'GET' && path === `/api/v1/projects/${projectId}` ? UNAVAILABLE : 'forward'));
    const failing = await ws.tf(['plan', '-input=false'], [1]);
    expect(failing.out).toContain('Error: injected fault');
    expect(flat(failing.out)).toContain('The service failed after 5 attempts. Run terraform apply again once it is healthy: this request (GET) is safe to repeat');
    expect(proxy.count('GET', `/api/v1/projects/${projectId}`)).toBe(5);

    proxy.inject(() => 'forward');
    expect((await ws.plan()).code).toBe(0);
    expect(await channelNames()).toEqual([...NAMES, 'late'].sort());
  });
});
