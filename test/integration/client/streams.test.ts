import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError, StreamClosedError, type AlertEvent, type ClientEvent, type StepUpdate } from '../../../src/client/index.js';
import { startService } from '../../../src/service/server.js';
import { runtimeOf } from '../../../src/service/runtime/runtime.js';
import { TestHttp } from '../../support/http.js';
import { startTestService, TestService, type TestTenant } from '../../support/service.js';
import { clientFor } from './helpers.js';

/**
 * The client's WebSocket streams against the real service: typed messages as async iterables,
 * refusals as ApiError, token renewal on 4401, reconnect after the service restarts.
 */
const HEARTBEAT_S = 0.2;
let svc: TestService;
let t: TestTenant;
let tenantId: string;
let projectId: string;
let pipelineId: string;

const alert = (status: string) => ({
  id: 'alert_1',
  project_id: projectId,
  alert_rule_id: 'rule_1',
  severity: 'critical',
  status,
  message: 'row count dropped',
  resource_id: null,
  fired_at: new Date().toISOString(),
  acknowledged_at: null,
  acknowledged_by: null,
  resolved_at: null,
  resolved_by: null,
});

/** Takes `n` messages from a stream (failing after `timeoutMs`), leaving the stream open. */
async function take<T>(iterator: AsyncIterator<T>, n: number, timeoutMs = 10_000): Promise<T[]> {
  const out: T[] = [];
  const deadline = Date.now() + timeoutMs;
  while (out.length < n) {
    const left = deadline - Date.now();
    const next = await Promise.race([iterator.next(), new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), Math.max(0, left)))]);
    if (next === 'timeout') throw new Error(`expected ${n} messages, got ${out.length}: ${JSON.stringify(out)}`);
    if (next.done) throw new Error(`the stream ended after ${out.length} of ${n} messages`);
    out.push(next.value);
  }
  return out;
}

/** Emits alert events until the stream has one (a fresh socket subscribes a moment after open). */
async function alertReaches(iterator: AsyncIterator<AlertEvent>, service: TestService, status: string): Promise<AlertEvent> {
  const timer = setInterval(() => runtimeOf(service.service.ctx).events.emit('alert_update', tenantId, alert(status)), 50);
  try {
    return (await take(iterator, 1))[0];
  } finally {
    clearInterval(timer);
  }
}

beforeAll(async () => {
  svc = await startTestService({ timeScale: 1000, streamHeartbeatSeconds: HEARTBEAT_S });
  t = await svc.tenant();
  tenantId = (await svc.service.ctx.tenants.bySlug(t.slug))!.id;
  projectId = (await svc.project(t, 'streams')).id;
  const base = `/projects/${projectId}`;
  const channel = (
    await svc.ok(t, 'POST', `${base}/notification-channels`, {
      body: { name: 'ops', type: 'email', config: { email_addresses: ['ops@example.com'] } },
    })
  ).id;
  const dbt = (
    await svc.ok(t, 'POST', `${base}/dbt-projects`, {
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
  pipelineId = (
    await svc.ok(t, 'POST', `${base}/pipelines`, {
      body: {
        name: 'nightly',
        steps: [
          { name: 'transform', type: 'dbt_run', dbt_project_id: dbt },
          { name: 'notify', type: 'notification', channel_id: channel, depends_on: ['transform'] },
        ],
      },
    })
  ).id;
});
afterAll(async () => {
  await svc?.close();
});

describe('pipeline run stream', () => {
  it('delivers every step update of a real run once and ends when the run has ended', async () => {
    const client = clientFor(svc, t);
    const { run_id } = await client.runPipeline(projectId, pipelineId);
    const messages: StepUpdate[] = [];
    for await (const m of client.streams.pipelineRun(pipelineId, run_id, { projectId })) messages.push(m);
    const run = await client.pipelineRun(projectId, pipelineId, run_id);
    expect(run.status).toBe('succeeded');
    expect(messages.map((m) => `${m.step_name}:${m.status}`)).toEqual([
      'transform:running',
      'transform:completed',
      'notify:running',
      'notify:completed',
    ]);
    for (const m of messages)
      expect(Object.keys(m).sort()).toEqual(['duration_seconds', 'status', 'step_id', 'step_name', 'timestamp', 'type']);
  });

  it('answers an unknown run with the service refusal as an ApiError (404), without retrying', async () => {
    const events: ClientEvent[] = [];
    const client = clientFor(svc, t, { onEvent: (e) => events.push(e) });
    const stream = client.streams.pipelineRun(pipelineId, 'run_missing');
    const error = await take(stream[Symbol.asyncIterator](), 1).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).status).toBe(404);
    expect((error as ApiError).code).toBe('resource_not_found');
    expect(events.filter((e) => e.type === 'retry')).toEqual([]);
  });
});

describe('alert stream', () => {
  it('ends with 4401 as a StreamClosedError when its API key is revoked (a key cannot be renewed)', async () => {
    const key = await svc.apiKey(t, projectId, 'read-only');
    const client = clientFor(svc, t, { apiKey: key.key });
    const iterator = client.streams.alerts()[Symbol.asyncIterator]();
    expect((await alertReaches(iterator, svc, 'firing')).type).toBe('alert_fired');
    await svc.ok(t, 'DELETE', `/projects/${projectId}/api-keys/${key.id}`);
    const error = await take(iterator, 1).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StreamClosedError);
    expect((error as StreamClosedError).code).toBe(4401);
  });

  it('renews an expired user token (4401) and goes on delivering', async () => {
    const s = await startTestService({ streamHeartbeatSeconds: HEARTBEAT_S, accessTokenTtl: 1 });
    try {
      const tenant = await s.tenant();
      tenantId = (await s.service.ctx.tenants.bySlug(tenant.slug))!.id;
      const events: ClientEvent[] = [];
      const client = clientFor(s, tenant, { onEvent: (e) => events.push(e) });
      const stream = client.streams.alerts();
      const iterator = stream[Symbol.asyncIterator]();
      expect((await alertReaches(iterator, s, 'firing')).type).toBe('alert_fired');
      // The access token lives 1 s; the heartbeat closes the socket with 4401 soon after.
      await new Promise((r) => setTimeout(r, 1600));
      expect((await alertReaches(iterator, s, 'acknowledged')).type).toBe('alert_acknowledged');
      expect(events.some((e) => e.type === 'auth' && (e.action === 'refresh' || e.action === 'login'))).toBe(true);
      expect(events.some((e) => e.type === 'retry' && e.route === '/ws/alerts')).toBe(false); // renewal, not a failure
      stream.close();
      expect(await iterator.next()).toEqual({ done: true, value: undefined });
    } finally {
      await s.close();
    }
  });

  it('reconnects after the service restarts (1001) and tells the caller, who can catch up', async () => {
    const first = await startTestService({ streamHeartbeatSeconds: HEARTBEAT_S });
    const { dataDir, port } = { dataDir: first.dataDir, port: first.port };
    const databaseUrl = first.service.ctx.options.databaseUrl;
    let second: TestService | undefined;
    try {
      const tenant = await first.tenant();
      tenantId = (await first.service.ctx.tenants.bySlug(tenant.slug))!.id;
      const client = clientFor(first, tenant);
      let reconnects = 0;
      const iterator = client.streams
        .alerts({ minBackoffMs: 50, maxBackoffMs: 200, onReconnect: () => reconnects++ })
        [Symbol.asyncIterator]();
      expect((await alertReaches(iterator, first, 'firing')).type).toBe('alert_fired');
      await first.service.close();
      const service = await startService({
        port,
        logLevel: 'silent',
        rateLimit: 100_000,
        dataDir,
        databaseUrl,
        streamHeartbeatSeconds: HEARTBEAT_S,
      });
      second = new TestService(service, new TestHttp(service.tls.certPath), dataDir);
      expect((await alertReaches(iterator, second, 'resolved')).type).toBe('alert_resolved');
      expect(reconnects).toBe(1);
      await iterator.return?.();
    } finally {
      await second?.close();
    }
  });
});
