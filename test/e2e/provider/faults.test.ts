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
  const api = <T = any>(method: string, path: string, body?: unknown, expected?: number) =>
    svc.ok<T>(t, method, path, body === undefined ? {} : { body }, expected);
  const channelNames = async () =>
    (await api<{ data: any[] }>('GET', `/projects/${projectId}/notification-channels?limit=100`)).data.map((c) => c.name as string).sort();
  const CHANNELS = /^\/api\/v1\/projects\/[^/]+\/notification-channels$/;
  const seen = (method: string, pattern: RegExp) => proxy.seen.filter((r) => r.method === method && pattern.test(r.path.split('?')[0]));
  /** Terraform wraps a diagnostic's detail at 78 columns. */
  const flat = (out: string) => out.replace(/\s+/g, ' ');
  const RATE_LIMITED: Fault = {
    status: 429,
    headers: { 'retry-after': '1' },
    body: { error: { code: 'rate_limited', message: 'slow down' } },
  };
  const UNAVAILABLE: Fault = { status: 503, body: { error: { code: 'internal_error', message: 'injected fault' } } };

  const channel = (resource: string, name: string) =>
    `\nresource "dataplatform_notification_channel" "${resource}" {\n  project_id = dataplatform_project.p.id\n  name       = "${name}"\n  type       = "email"\n  config     = { email_addresses = ["${name}@example.com"] }\n}\n`;

  beforeAll(async () => {
    svc = await startTestService();
    t = await svc.tenant();
    proxy = await FaultProxy.start(svc);
    ws = await TerraformWorkspace.create(svc, t, { endpoint: `https://${t.slug}.localhost:${proxy.port}` });
    ws.write(
      'main.tf',
      `${PROVIDER_BLOCK}\nresource "dataplatform_project" "p" {\n  name = "faults"\n}\n${NAMES.map((n, i) => channel(`c${i}`, n)).join('')}`,
    );
    await ws.init();
  }, 60_000);

  afterAll(async () => {
    await proxy?.close();
    await svc?.close();
    ws?.close();
  });

  it(
    'waits out 429s, retries GETs answered 503, never re-sends a create answered 503 before looking it up by name; converges in one apply',
    { timeout: 120_000 },
    async () => {
      // The first request of every method and path is rate limited (Retry-After: 1); the second
      // create of a channel to arrive gets a 503 without reaching the service.
      proxy.inject(({ method, path, n }) =>
        n === 1 ? RATE_LIMITED : method === 'POST' && CHANNELS.test(path) && n === 2 ? UNAVAILABLE : 'forward',
      );
      expect(await ws.apply()).toContain('Apply complete! Resources: 5 added, 0 changed, 0 destroyed.');
      projectId = (await api<{ data: any[] }>('GET', '/projects')).data.find((p) => p.name === 'faults').id;
      expect(await channelNames()).toEqual(NAMES);
      expect((await api<{ data: any[] }>('GET', '/projects')).data.filter((p) => p.name === 'faults')).toHaveLength(1);
      // 4 creates, the retry of the 429, and the create sent again only after the lookup found nothing.
      const posts = seen('POST', CHANNELS);
      expect(posts.map((r) => r.fault).sort()).toEqual(
        [JSON.stringify(RATE_LIMITED), JSON.stringify(UNAVAILABLE), 'forward', 'forward', 'forward', 'forward'].sort(),
      );
      // After the 503, the channels were listed (the lookup), and a create came after that (the one
      // sent again; the other creates may arrive around the 503, as they run in parallel).
      const unavailableAt = proxy.seen.findIndex((r) => r.fault === JSON.stringify(UNAVAILABLE));
      const lookup = proxy.seen.findIndex(
        (r, i) => i > unavailableAt && r.method === 'GET' && CHANNELS.test(r.path.split('?')[0]) && r.fault === 'forward',
      );
      const lastCreate = proxy.seen.map((r) => r.method === 'POST' && CHANNELS.test(r.path.split('?')[0])).lastIndexOf(true);
      expect(lookup).toBeGreaterThan(unavailableAt);
      expect(lastCreate).toBeGreaterThan(lookup);
      expect(seen('POST', /^\/api\/v1\/projects$/).map((r) => r.fault)).toEqual([JSON.stringify(RATE_LIMITED), 'forward']);

      // A refresh under 429s and 503s on GETs (each retried) plans nothing.
      proxy.inject(({ method, n }) => (n === 1 ? RATE_LIMITED : method === 'GET' && n === 2 ? UNAVAILABLE : 'forward'));
      expect((await ws.plan()).code).toBe(0);
      expect(proxy.seen.filter((r) => r.method === 'GET' && r.fault === JSON.stringify(UNAVAILABLE)).length).toBeGreaterThan(0);
      expect(proxy.seen.filter((r) => r.fault === JSON.stringify(RATE_LIMITED)).length).toBeGreaterThan(1);
      proxy.inject(() => 'forward');
    },
  );

  it(
    'a create that reached the service but was answered 503: found by name and taken into the state, not duplicated',
    { timeout: 120_000 },
    async () => {
      ws.write('late.tf', channel('late', 'late'));
      proxy.inject(({ method, path }) => (method === 'POST' && CHANNELS.test(path) ? { forwardThenStatus: 503 } : 'forward'));
      expect(await ws.apply()).toContain('Apply complete! Resources: 1 added, 0 changed, 0 destroyed.');
      expect(seen('POST', CHANNELS).map((r) => r.fault)).toEqual([JSON.stringify({ forwardThenStatus: 503 })]);
      expect(await channelNames()).toEqual([...NAMES, 'late'].sort());
      proxy.inject(() => 'forward');
      expect((await ws.plan()).code).toBe(0);
      const state = await ws.show();
      const late = state.values.root_module.resources.find((r: any) => r.address === 'dataplatform_notification_channel.late');
      const live = (await api<{ data: any[] }>('GET', `/projects/${projectId}/notification-channels?limit=100`)).data.find(
        (c) => c.name === 'late',
      );
      expect(late.values.id).toBe(live.id);
    },
  );

  it('a channel made by hand with the name of a new resource: 409 with the import that fixes it', { timeout: 120_000 }, async () => {
    await api(
      'POST',
      `/projects/${projectId}/notification-channels`,
      { name: 'by-hand', type: 'email', config: { email_addresses: ['by-hand@example.com'] } },
      201,
    );
    ws.write('by-hand.tf', channel('by_hand', 'by-hand'));
    const refused = await ws.tf(['apply', '-auto-approve', '-input=false'], [1]);
    expect(refused.out).toContain('Error: A notification channel with name "by-hand" already exists in this project');
    expect(flat(refused.out)).toContain(
      `import it with terraform import dataplatform_notification_channel.<label> ${projectId}/by-hand (the address after "with" above), or an import block with id = "${projectId}/by-hand"`,
    );
    expect(refused.out).toContain('with dataplatform_notification_channel.by_hand,');
    expect(await channelNames()).toEqual([...NAMES, 'by-hand', 'late'].sort());

    const imported = await ws.tf(['import', '-input=false', 'dataplatform_notification_channel.by_hand', `${projectId}/by-hand`]);
    expect(imported.out).toContain('Import successful!');
    expect((await ws.plan()).code).toBe(0);
    expect(await channelNames()).toEqual([...NAMES, 'by-hand', 'late'].sort());
  });

  it('gives up on endless 429s and 503s with what to do', { timeout: 120_000 }, async () => {
    // A Retry-After longer than a call may wait fails at once.
    proxy.inject(({ method, path }) =>
      method === 'GET' && !path.startsWith('/api/v1/auth/')
        ? { status: 429, headers: { 'retry-after': '3600' }, body: { error: { code: 'rate_limited', message: 'Rate limit exceeded' } } }
        : 'forward',
    );
    const limited = await ws.tf(['plan', '-input=false'], [1]);
    expect(limited.out).toContain('Error: Rate limit exceeded');
    expect(flat(limited.out)).toContain(
      'Rate limited: the service kept answering 429 Too Many Requests beyond what the provider waits out. Try again later, or lower -parallelism',
    );

    proxy.inject(({ method, path }) => (method === 'GET' && path === `/api/v1/projects/${projectId}` ? UNAVAILABLE : 'forward'));
    const failing = await ws.tf(['plan', '-input=false'], [1]);
    expect(failing.out).toContain('Error: injected fault');
    expect(flat(failing.out)).toContain(
      'The service failed after 5 attempts. Run terraform apply again once it is healthy: this request (GET) is safe to repeat',
    );
    expect(proxy.count('GET', `/api/v1/projects/${projectId}`)).toBe(5);

    proxy.inject(() => 'forward');
    expect((await ws.plan()).code).toBe(0);
    expect(await channelNames()).toEqual([...NAMES, 'by-hand', 'late'].sort());
  });
});
