import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxy } from '../../support/fault-proxy.js';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import { haveTerraform, PROVIDER_BLOCK, TerraformWorkspace } from './harness.js';

const N = 30;

/**
 * What the provider asks the service for, counted on the wire: Terraform talks to the service
 * through a forwarding HTTPS proxy (the service's own certificates) that records each request.
 */
describe.skipIf(testStore() === 'postgres' || !haveTerraform)('provider API calls and service errors (real terraform)', () => {
  let svc: TestService;
  let t: TestTenant;
  let proxy: FaultProxy;
  let ws: TerraformWorkspace;
  let projectId: string;
  const api = <T = any>(method: string, path: string, body?: unknown, expected?: number) =>
    svc.ok<T>(t, method, path, body === undefined ? {} : { body }, expected);
  const channels = async () => (await api<{ data: any[] }>('GET', `/projects/${projectId}/notification-channels?limit=100`)).data;
  const requests = (method: string, pattern: RegExp) => proxy.seen.filter((r) => r.method === method && pattern.test(r.path.split('?')[0]));

  beforeAll(async () => {
    svc = await startTestService();
    t = await svc.tenant();
    proxy = await FaultProxy.start(svc);
    ws = await TerraformWorkspace.create(svc, t, { endpoint: `https://${t.slug}.localhost:${proxy.port}` });
    ws.write(
      'main.tf',
      `${PROVIDER_BLOCK}\nresource "dataplatform_project" "p" {\n  name = "refresh"\n}\n\n` +
        `resource "dataplatform_notification_channel" "many" {\n  count      = ${N}\n  project_id = dataplatform_project.p.id\n  name       = "ch-\${count.index}"\n  type       = "email"\n  config     = { email_addresses = ["team-\${count.index}@example.com"] }\n  labels     = { n = "\${count.index}" }\n}\n`,
    );
    await ws.init();
    await ws.apply();
    projectId = (await api<{ data: any[] }>('GET', '/projects')).data.find((p) => p.name === 'refresh').id;
  }, 120_000);

  afterAll(async () => {
    await proxy?.close();
    await svc?.close();
    ws?.close();
  });

  it(`refreshes ${N} resources of a kind with one list call, not ${N} GETs`, { timeout: 60_000 }, async () => {
    proxy.inject(() => 'forward');
    const plan = await ws.plan();
    expect(plan.code, plan.out).toBe(0);
    const item = requests('GET', /^\/api\/v1\/projects\/[^/]+\/notification-channels\/[^/]+$/);
    const lists = requests('GET', /^\/api\/v1\/projects\/[^/]+\/notification-channels$/);
    // The first read of the collection is a plain GET; the second starts the listing (30 fit one page).
    expect(item.length, proxy.seen.map((r) => `${r.method} ${r.path}`).join('\n')).toBeLessThanOrEqual(1);
    expect(lists).toHaveLength(1);
    expect(lists[0].path).toContain('limit=100');
    // The provider's check of its credentials when it starts (configure-provider.ts), once a process.
    const checks = proxy.seen.filter((r) => r.method === 'GET' && r.path === '/api/v1/projects?limit=1');
    expect(checks.length).toBeGreaterThanOrEqual(1);
    const total = proxy.seen.filter((r) => !r.path.startsWith('/api/v1/auth/')).length - checks.length;
    expect(total).toBeLessThanOrEqual(3); // the project, at most one channel GET, one list
  });

  it('still sees drift and deletions in reads served from the list', { timeout: 60_000 }, async () => {
    const all = await channels();
    const drifted = all.find((c) => c.name === 'ch-7');
    const deleted = all.find((c) => c.name === 'ch-21');
    await api('PATCH', `/projects/${projectId}/notification-channels/${drifted.id}`, { labels: { n: 'changed' } }, 200);
    await api('DELETE', `/projects/${projectId}/notification-channels/${deleted.id}`, undefined, 204);
    proxy.inject(() => 'forward');
    const plan = await ws.plan();
    expect(plan.code).toBe(2);
    expect(plan.out).toContain('dataplatform_notification_channel.many[7] will be updated in-place');
    expect(plan.out).toMatch(/"n"\s+= "changed" -> "7"/);
    expect(plan.out).toContain('dataplatform_notification_channel.many[21] will be created');
    expect(plan.out).toContain('Plan: 1 to add, 1 to change, 0 to destroy.');
    // The deleted one was confirmed with its own GET (a 404); the others came from one list.
    expect(requests('GET', /^\/api\/v1\/projects\/[^/]+\/notification-channels$/)).toHaveLength(1);
    expect(requests('GET', /^\/api\/v1\/projects\/[^/]+\/notification-channels\/[^/]+$/).length).toBeLessThanOrEqual(2);
    await ws.apply();
    expect((await ws.plan()).code).toBe(0);
  });

  it("points the service's field errors at the attribute in the configuration", { timeout: 60_000 }, async () => {
    // The provider cannot know that this id names nothing: the schema accepts any string, and
    // only the service checks references. Its validation_error details name the field.
    ws.write(
      'bad.tf',
      `resource "dataplatform_alert_rule" "dangling" {\n  project_id  = dataplatform_project.p.id\n  name        = "dangling"\n  severity    = "warning"\n  condition   = { metric = "run_failed", operator = "gt", threshold = 0 }\n  target      = { connector_id = "con_doesnotexist" }\n  channel_ids = [dataplatform_notification_channel.many[0].id, "chn_doesnotexist"]\n}\n`,
    );
    try {
      const out = (await ws.tf(['apply', '-auto-approve', '-input=false'], [1])).out;
      expect(out).toContain('Error: dataplatform_alert_rule: target.connector_id no connector with id "con_doesnotexist" in this project');
      expect(out).toContain(
        'Error: dataplatform_alert_rule: channel_ids[1] no notification channel with id "chn_doesnotexist" in this project',
      );
      // Terraform shows the configuration line of the attribute the diagnostic points at.
      expect(out).toMatch(
        /on bad\.tf line 6, in resource "dataplatform_alert_rule" "dangling":\s*\n\s*6:\s+target\s+= \{ connector_id = "con_doesnotexist" \}/,
      );
      expect(out).toMatch(/on bad\.tf line 7, in resource "dataplatform_alert_rule" "dangling":\s*\n\s*7:\s+channel_ids = \[/);
    } finally {
      ws.remove('bad.tf');
    }
  });
});
