import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runtimeOf } from '../../../src/service/runtime/runtime.js';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import { refused, sleep, wsUrl, WsClient } from './ws-client.js';

/**
 * The WebSocket streams (spec sections 4 and 6): wss://<tenant>.localhost/api/v1/ws/pipelines/{p}/runs/{r}
 * and /ws/alerts. Auth is the `token` query parameter; refusals are HTTP errors before the upgrade.
 */
const HEARTBEAT_S = 0.2;
let offsetMs = 0;
let svc: TestService;
let t: TestTenant;
let other: TestTenant;
let tenantId: string;
let otherTenantId: string;
let projectId: string;
let project2: string;
let pipelineId: string;
let runId: string;
let first: WsClient;

const STEP_FIELDS = ['duration_seconds', 'status', 'step_id', 'step_name', 'timestamp', 'type'];
const runPath = () => `/ws/pipelines/${pipelineId}/runs/${runId}`;

async function pipelineIn(s: TestService, tenant: TestTenant, project: string) {
  const base = `/projects/${project}`;
  const channel = (
    await s.ok(tenant, 'POST', `${base}/notification-channels`, {
      body: { name: 'ops', type: 'email', config: { email_addresses: ['ops@example.com'] } },
    })
  ).id;
  const dbt = (
    await s.ok(tenant, 'POST', `${base}/dbt-projects`, {
      body: {
        name: 'models',
        repository: 'https://git.example.com/m.git',
        models: [
          { name: 'a', materialization: 'table' },
          { name: 'b', depends_on: ['a'] },
        ],
      },
    })
  ).id;
  return (
    await s.ok(tenant, 'POST', `${base}/pipelines`, {
      body: {
        name: 'nightly',
        steps: [
          { name: 'transform', type: 'dbt_run', dbt_project_id: dbt },
          { name: 'notify', type: 'notification', channel_id: channel, depends_on: ['transform'] },
        ],
      },
    })
  ).id as string;
}

beforeAll(async () => {
  svc = await startTestService({ timeScale: 1000, streamHeartbeatSeconds: HEARTBEAT_S, clock: () => Date.now() + offsetMs });
  [t, other] = [await svc.tenant(), await svc.tenant()];
  tenantId = (await svc.service.ctx.tenants.bySlug(t.slug))!.id;
  otherTenantId = (await svc.service.ctx.tenants.bySlug(other.slug))!.id;
  projectId = (await svc.project(t, 'streams')).id;
  project2 = (await svc.project(t, 'streams-2')).id;
  pipelineId = await pipelineIn(svc, t, projectId);
  runId = (await svc.ok(t, 'POST', `/projects/${projectId}/pipelines/${pipelineId}/run`)).run_id;
  first = await WsClient.connect(svc, wsUrl(svc, t.slug, runPath(), t.adminToken));
});
afterAll(async () => {
  await svc?.close();
});

describe('pipeline run stream', () => {
  it('sends every step update of the run, in order, with exactly the spec fields', async () => {
    const msgs = await first.count(4);
    await sleep(100);
    expect(first.messages).toHaveLength(4);
    for (const m of msgs) {
      expect(Object.keys(m).sort()).toEqual(STEP_FIELDS);
      expect(m.type).toBe('step_update');
      expect(Number.isNaN(Date.parse(m.timestamp))).toBe(false);
    }
    expect(msgs.map((m) => `${m.step_name}:${m.status}`)).toEqual([
      'transform:running',
      'transform:completed',
      'notify:running',
      'notify:completed',
    ]);
    expect(msgs.map((m) => m.step_id)).toEqual(['step_1', 'step_1', 'step_2', 'step_2']);
    // A number in every message, as the spec types it: 0 when the step starts.
    expect(msgs[0].duration_seconds).toBe(0);
    expect(typeof msgs[1].duration_seconds).toBe('number');
    const run = await svc.ok(t, 'GET', `/projects/${projectId}/pipelines/${pipelineId}/runs/${runId}`);
    expect(msgs[1].duration_seconds).toBe(run.steps[0].duration_seconds);
  });

  it('delivers live runtime events of this run only', async () => {
    const rt = runtimeOf(svc.service.ctx);
    const message = {
      type: 'step_update',
      step_id: 'step_9',
      step_name: 'live',
      status: 'completed',
      duration_seconds: 1.5,
      timestamp: new Date().toISOString(),
    };
    rt.events.emit('step_update', tenantId, {
      pipeline_id: pipelineId,
      run_id: 'run_other',
      message: { ...message, step_id: 'wrong_run' },
    });
    rt.events.emit('step_update', otherTenantId, {
      pipeline_id: pipelineId,
      run_id: runId,
      message: { ...message, step_id: 'wrong_tenant' },
    });
    rt.events.emit('step_update', tenantId, { pipeline_id: pipelineId, run_id: runId, message });
    const msgs = await first.count(5);
    await sleep(50);
    expect(msgs.slice(4)).toEqual([message]);
  });

  it('refuses a missing, invalid or expired token with 401 before the upgrade; the Authorization header is not used', async () => {
    for (const url of [wsUrl(svc, t.slug, runPath()), wsUrl(svc, t.slug, runPath(), 'dpat_not-a-token')]) {
      const res = await refused(svc, url);
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
    }
    const header = await refused(svc, wsUrl(svc, t.slug, runPath()), { Authorization: `Bearer ${t.adminToken}` });
    expect(header.status).toBe(401);
    const user = await svc.user(t, 'read-only');
    offsetMs = 2 * 3600_000;
    try {
      const res = await refused(svc, wsUrl(svc, t.slug, runPath(), user.token));
      expect(res.status).toBe(401);
      expect(res.body.error.message).toMatch(/expired/);
    } finally {
      offsetMs = 0;
    }
  });

  it('answers 404 for an unknown run, a run of another pipeline, another tenant, or an API key of another project', async () => {
    const key2 = await svc.apiKey(t, project2, 'admin');
    const otherPipeline = await pipelineIn(svc, t, project2);
    for (const [url, what] of [
      [wsUrl(svc, t.slug, `/ws/pipelines/${pipelineId}/runs/run_nope`, t.adminToken), 'Run'],
      [wsUrl(svc, t.slug, `/ws/pipelines/${otherPipeline}/runs/${runId}`, t.adminToken), 'Run'],
      [wsUrl(svc, t.slug, runPath(), key2.key), 'Pipeline'],
      [wsUrl(svc, other.slug, runPath(), other.adminToken), 'Pipeline'],
    ]) {
      const res = await refused(svc, url);
      expect(res.status, url).toBe(404);
      expect(res.body.error.code).toBe('resource_not_found');
      expect(res.body.error.message).toContain(what);
    }
  });

  it('answers 426 to a plain GET', async () => {
    const res = await svc.call(t, 'GET', `${runPath()}?token=${t.adminToken}`);
    expect(res.status).toBe(426);
    expect(res.body.error.code).toBe('validation_error');
  });

  it('lets a read-only key subscribe; revoking it closes the socket with 4401 within a heartbeat', async () => {
    const key = await svc.apiKey(t, projectId, 'read-only');
    const c = await WsClient.connect(svc, wsUrl(svc, t.slug, runPath(), key.key));
    await c.count(4); // the catch-up of the finished run
    await svc.ok(t, 'DELETE', `/projects/${projectId}/api-keys/${key.id}`);
    const revokedAt = Date.now();
    const closed = await c.closed;
    expect(closed.code).toBe(4401);
    expect(closed.reason).toMatch(/revoked/i);
    expect(Date.now() - revokedAt).toBeLessThan(HEARTBEAT_S * 1000 * 2 + 500);
  });

  it('closes with 4401 when the access token expires while connected', async () => {
    const user = await svc.user(t, 'read-only');
    const c = await WsClient.connect(svc, wsUrl(svc, t.slug, runPath(), user.token));
    offsetMs = 2 * 3600_000;
    try {
      const closed = await c.closed;
      expect(closed.code).toBe(4401);
      expect(closed.reason).toMatch(/expired/);
    } finally {
      offsetMs = 0;
    }
  });

  it('terminates a socket that does not answer pings', async () => {
    const c = await WsClient.connect(svc, wsUrl(svc, t.slug, runPath(), t.adminToken), { autoPong: false });
    const closed = await c.closed;
    expect(closed.code).toBe(1006); // terminated without a close frame
  });
});

describe('alert stream', () => {
  const firedAt = new Date().toISOString();
  const alert = (project: string, status: string) => ({
    id: `alert_${status}`,
    project_id: project,
    alert_rule_id: 'rule_1',
    severity: 'critical',
    status,
    message: 'row count dropped',
    resource_id: null,
    fired_at: firedAt,
    acknowledged_at: null,
    acknowledged_by: null,
    resolved_at: null,
    resolved_by: null,
  });

  it('sends alert_fired / acknowledged / resolved to the tenant, and to an API key only for its project', async () => {
    const key = await svc.apiKey(t, projectId, 'read-only');
    const admin = await WsClient.connect(svc, wsUrl(svc, t.slug, '/ws/alerts', t.adminToken));
    const scoped = await WsClient.connect(svc, wsUrl(svc, t.slug, '/ws/alerts', key.key));
    const outsider = await WsClient.connect(svc, wsUrl(svc, other.slug, '/ws/alerts', other.adminToken));
    const rt = runtimeOf(svc.service.ctx);
    rt.events.emit('alert_update', tenantId, alert(project2, 'firing'));
    rt.events.emit('alert_update', tenantId, alert(projectId, 'firing'));
    rt.events.emit('alert_update', tenantId, alert(projectId, 'acknowledged'));
    rt.events.emit('alert_update', tenantId, alert(projectId, 'resolved'));
    await admin.count(4);
    await scoped.count(3);
    await sleep(100);
    expect(admin.messages.map((m) => `${m.type}:${m.alert.project_id === projectId ? 1 : 2}`)).toEqual([
      'alert_fired:2',
      'alert_fired:1',
      'alert_acknowledged:1',
      'alert_resolved:1',
    ]);
    expect(scoped.messages.map((m) => m.type)).toEqual(['alert_fired', 'alert_acknowledged', 'alert_resolved']);
    for (const m of scoped.messages) {
      expect(Object.keys(m).sort()).toEqual(['alert', 'timestamp', 'type']);
      expect(m.alert.project_id).toBe(projectId);
      expect(Number.isNaN(Date.parse(m.timestamp))).toBe(false);
    }
    expect(scoped.messages[0].alert).toEqual(alert(projectId, 'firing'));
    expect(outsider.messages).toEqual([]);
    for (const c of [admin, scoped, outsider]) c.close();
  });

  it('refuses a bad token with 401', async () => {
    const res = await refused(svc, wsUrl(svc, t.slug, '/ws/alerts', 'dpk_bogus'));
    expect(res.status).toBe(401);
  });
});

describe('revocation closes streams at once, not at the next heartbeat', () => {
  it('a deleted API key, a disabled user, a deleted project: 4401/4404 within a second with a heartbeat of a minute', async () => {
    const s = await startTestService({ timeScale: 1000, streamHeartbeatSeconds: 60 });
    try {
      const tt = await s.tenant();
      const project = (await s.project(tt, 'revoked')).id;
      const key = await s.apiKey(tt, project, 'read-only');
      const user = await s.user(tt, 'read-only');
      const keyStream = await WsClient.connect(s, wsUrl(s, tt.slug, '/ws/alerts', key.key));
      const userStream = await WsClient.connect(s, wsUrl(s, tt.slug, '/ws/alerts', user.token));
      const adminStream = await WsClient.connect(s, wsUrl(s, tt.slug, '/ws/alerts', tt.adminToken));
      await sleep(100);

      let at = Date.now();
      await s.ok(tt, 'DELETE', `/projects/${project}/api-keys/${key.id}`);
      expect((await keyStream.closed).code).toBe(4401);
      expect(Date.now() - at).toBeLessThan(1000);

      at = Date.now();
      await s.ok(tt, 'PATCH', `/users/${user.id}`, { body: { disabled: true } });
      expect((await userStream.closed).code).toBe(4401);
      expect(Date.now() - at).toBeLessThan(1000);

      // Another key of a project that is then deleted goes too; the admin's stream stays.
      const other = (await s.project(tt, 'deleted')).id;
      const otherKey = await s.apiKey(tt, other, 'read-only');
      const otherStream = await WsClient.connect(s, wsUrl(s, tt.slug, '/ws/alerts', otherKey.key));
      at = Date.now();
      await s.ok(tt, 'DELETE', `/projects/${other}`);
      expect((await otherStream.closed).code).toBe(4401);
      expect(Date.now() - at).toBeLessThan(1000);
      await sleep(200);
      expect(adminStream.ws.readyState).toBe(adminStream.ws.OPEN);
      adminStream.close();
    } finally {
      await s.close();
    }
  });
});

describe('streams per tenant (--max-streams-per-tenant)', () => {
  it("refuses a tenant's stream past its cap with 429 in the envelope, leaves other tenants alone, and admits again once one closes", async () => {
    const s = await startTestService({ maxStreamsPerTenant: 2 });
    try {
      const [a, b] = [await s.tenant(), await s.tenant()];
      const open = [await WsClient.connect(s, wsUrl(s, a.slug, '/ws/alerts', a.adminToken))];
      open.push(await WsClient.connect(s, wsUrl(s, a.slug, '/ws/alerts', a.adminToken)));
      const third = await refused(s, wsUrl(s, a.slug, '/ws/alerts', a.adminToken));
      expect(third.status).toBe(429);
      expect(third.body.error).toMatchObject({ code: 'rate_limited', message: expect.stringContaining('--max-streams-per-tenant') });
      const other = await WsClient.connect(s, wsUrl(s, b.slug, '/ws/alerts', b.adminToken));
      open[0].close();
      await open[0].closed;
      await sleep(50);
      open.push(await WsClient.connect(s, wsUrl(s, a.slug, '/ws/alerts', a.adminToken)));
      for (const c of [...open, other]) c.close();
    } finally {
      await s.close();
    }
  });
});

describe('shutdown', () => {
  it('closes sockets with 1001 on service.close()', async () => {
    const s = await startTestService({ streamHeartbeatSeconds: HEARTBEAT_S });
    const tt = await s.tenant();
    const c = await WsClient.connect(s, wsUrl(s, tt.slug, '/ws/alerts', tt.adminToken));
    const started = Date.now();
    await s.close();
    expect((await c.closed).code).toBe(1001);
    expect(Date.now() - started).toBeLessThan(5000);
  });
});

describe.skipIf(testStore() !== 'postgres')('replicas (PostgreSQL)', () => {
  it('a subscriber on replica B receives the step updates of a run executed on replica A', async () => {
    const b = await startTestService({
      timeScale: 1000,
      streamHeartbeatSeconds: HEARTBEAT_S,
      databaseUrl: svc.service.ctx.options.databaseUrl,
    });
    try {
      const c = await WsClient.connect(b, wsUrl(b, t.slug, runPath(), t.adminToken));
      await c.count(4); // catch-up of the finished run, read from the shared store
      const message = {
        type: 'step_update',
        step_id: 'step_7',
        step_name: 'from-a',
        status: 'running',
        duration_seconds: 0,
        timestamp: new Date().toISOString(),
      };
      runtimeOf(svc.service.ctx).events.emit('step_update', tenantId, { pipeline_id: pipelineId, run_id: runId, message });
      await c.count(5);
      expect(c.messages[4]).toEqual(message);

      // A live run on A, watched from B from the start (nothing delivered twice).
      const alerts = await WsClient.connect(b, wsUrl(b, t.slug, '/ws/alerts', t.adminToken));
      const run2 = (await svc.ok(t, 'POST', `/projects/${projectId}/pipelines/${pipelineId}/run`)).run_id;
      const live = await WsClient.connect(b, wsUrl(b, t.slug, `/ws/pipelines/${pipelineId}/runs/${run2}`, t.adminToken));
      const msgs = await live.count(4);
      await sleep(200);
      expect(live.messages).toHaveLength(4);
      expect(msgs.map((m) => `${m.step_name}:${m.status}`)).toEqual([
        'transform:running',
        'transform:completed',
        'notify:running',
        'notify:completed',
      ]);

      // Big events travel by reference.
      const big = { id: 'alert_big', project_id: projectId, status: 'firing', message: 'x'.repeat(20_000) };
      runtimeOf(svc.service.ctx).events.emit('alert_update', tenantId, big);
      const [m] = await alerts.count(1);
      expect(m.alert).toEqual(big);
      for (const x of [c, alerts, live]) x.close();
    } finally {
      await b.close();
    }
  });

  it('a key deleted through replica A closes its stream on replica B at once (B caches keys, and its heartbeat is a minute)', async () => {
    const b = await startTestService({ streamHeartbeatSeconds: 60, databaseUrl: svc.service.ctx.options.databaseUrl });
    try {
      const key = await svc.apiKey(t, projectId, 'read-only');
      // B has looked the key up (cached): a REST read, then the stream.
      expect((await b.call(t.slug, 'GET', `/projects/${projectId}/connectors`, { token: key.key })).status).toBe(200);
      const stream = await WsClient.connect(b, wsUrl(b, t.slug, '/ws/alerts', key.key));
      await sleep(100);
      const at = Date.now();
      await svc.ok(t, 'DELETE', `/projects/${projectId}/api-keys/${key.id}`);
      expect((await stream.closed).code).toBe(4401);
      expect(Date.now() - at).toBeLessThan(1000);
      expect((await b.call(t.slug, 'GET', `/projects/${projectId}/connectors`, { token: key.key })).status).toBe(401);
    } finally {
      await b.close();
    }
  });
});
