import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceContext } from '../../../src/service/context.js';
import { runtimeOf } from '../../../src/service/runtime/runtime.js';
import type { StoredResource } from '../../../src/service/store/resources.js';
import { streamsOf } from '../../../src/service/streams/index.js';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import { sleep, wsUrl, WsClient } from './ws-client.js';

/**
 * Step updates go out when the step changes, before the coalesced write that stores the change
 * (RunRecorder.announce). A subscriber that connects in between catches up from the stored run
 * (which does not hold the change yet) plus the updates the streams keep until their write's
 * run_stored. Here the run's progress writes are held back while two steps run and a third
 * starts: the stored run shows every step pending while five updates are out, and subscribers
 * early and late must each get every update exactly once.
 */
let svc: TestService;
let t: TestTenant;
let projectId: string;
let pipelineId: string;

/** Holds the progress writes of pipeline runs (RunRecorder's, outside a transaction) until release(). */
function holdProgressWrites(ctx: ServiceContext) {
  const resources = ctx.resources;
  const original = resources.update.bind(resources);
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  resources.update = async (r: StoredResource, q?: Parameters<typeof original>[1]) => {
    if (q === undefined && r.kind === 'run' && (r.data as { run_type?: string }).run_type === 'pipeline') await released;
    return original(r, q);
  };
  return {
    release() {
      release();
      resources.update = original;
    },
  };
}

/** Resolves when `n` step_update events of the pipeline's runs have been announced in this process (from now on). */
function announced(ctx: ServiceContext, pipeline: string, n: number): Promise<void> {
  const events = runtimeOf(ctx).events;
  let seen = 0;
  return new Promise((resolve) => {
    const on = (_tenant: string, e: { pipeline_id: string }) => {
      if (e.pipeline_id !== pipeline || ++seen < n) return;
      events.off('step_update', on);
      resolve();
    };
    events.on('step_update', on);
  });
}

async function pipelineIn(s: TestService, tenant: TestTenant, project: string) {
  const base = `/projects/${project}`;
  const channel = (
    await s.ok(tenant, 'POST', `${base}/notification-channels`, {
      body: { name: 'ops', type: 'email', config: { email_addresses: ['ops@example.com'] } },
    })
  ).id;
  const dbt = (
    await s.ok(tenant, 'POST', `${base}/dbt-projects`, {
      body: { name: 'models', repository: 'https://git.example.com/m.git', models: [{ name: 'a', materialization: 'view' }] },
    })
  ).id;
  // About 3 s at time scale 10: the run is still running while the test looks.
  const slow = (
    await s.ok(tenant, 'POST', `${base}/dbt-projects`, {
      body: {
        name: 'slow',
        repository: 'https://git.example.com/s.git',
        models: Array.from({ length: 12 }, (_, i) => ({ name: `t${i}`, materialization: 'table' })),
      },
    })
  ).id;
  return (
    await s.ok(tenant, 'POST', `${base}/pipelines`, {
      body: {
        name: 'held',
        steps: [
          { name: 'transform', type: 'dbt_run', dbt_project_id: dbt },
          { name: 'notify', type: 'notification', channel_id: channel, depends_on: ['transform'] },
          { name: 'tail', type: 'dbt_run', dbt_project_id: slow, depends_on: ['notify'] },
        ],
      },
    })
  ).id as string;
}

const ANNOUNCED = ['transform:running', 'transform:completed', 'notify:running', 'notify:completed', 'tail:running'];
const ALL = [...ANNOUNCED, 'tail:completed'];
const pairs = (c: WsClient) => c.messages.map((m) => `${m.step_name}:${m.status}`);
const runPath = (runId: string) => `/projects/${projectId}/pipelines/${pipelineId}/runs/${runId}`;

async function ended(s: TestService, runId: string) {
  for (;;) {
    const run = await s.ok(t, 'GET', runPath(runId));
    if (run.status !== 'running') return run;
    await sleep(20);
  }
}

beforeAll(async () => {
  svc = await startTestService({ timeScale: 10 });
  t = await svc.tenant();
  projectId = (await svc.project(t, 'before-stored')).id;
  pipelineId = await pipelineIn(svc, t, projectId);
});
afterAll(async () => {
  await svc?.close();
});

describe('step updates announced before their write', () => {
  it('are sent when the step changes, and a subscriber that connects before the write still gets each once', async () => {
    const ctx = svc.service.ctx;
    const hold = holdProgressWrites(ctx);
    const fiveOut = announced(ctx, pipelineId, 5);
    let runId = '';
    try {
      runId = (await svc.ok(t, 'POST', `/projects/${projectId}/pipelines/${pipelineId}/run`)).run_id as string;
      const early = await WsClient.connect(svc, wsUrl(svc, t.slug, `/ws/pipelines/${pipelineId}/runs/${runId}`, t.adminToken));
      await fiveOut;
      // Nothing announced is stored yet: every step is pending in the store...
      const stored = await svc.ok(t, 'GET', runPath(runId));
      expect(stored.steps.map((s: { status: string }) => s.status)).toEqual(['pending', 'pending', 'pending']);
      expect(streamsOf(ctx)!.unstoredRuns).toBe(1);
      // ...and the early subscriber has every update already.
      await early.count(5);
      expect(pairs(early)).toEqual(ANNOUNCED);

      // A late one catches up from the store (nothing) plus what is announced and not stored.
      const late = await WsClient.connect(svc, wsUrl(svc, t.slug, `/ws/pipelines/${pipelineId}/runs/${runId}`, t.adminToken));
      await late.count(5);
      expect(pairs(late)).toEqual(ANNOUNCED);

      hold.release();
      // The held write lands and its run_stored covers all five: nothing is kept for the run any more.
      const deadline = Date.now() + 5_000;
      while (streamsOf(ctx)!.unstoredRuns > 0 && Date.now() < deadline) await sleep(10);
      expect(streamsOf(ctx)!.unstoredRuns).toBe(0);
      expect((await ended(svc, runId)).status).toBe('succeeded');
      await sleep(100);
      expect(pairs(early)).toEqual(ALL);
      expect(pairs(late)).toEqual(ALL);
      const after = await WsClient.connect(svc, wsUrl(svc, t.slug, `/ws/pipelines/${pipelineId}/runs/${runId}`, t.adminToken));
      await after.count(6);
      await sleep(100);
      expect(pairs(after)).toEqual(ALL);
      for (const c of [early, late, after]) c.close();
    } finally {
      hold.release();
      if (runId) await ended(svc, runId);
    }
  });
});

describe.skipIf(testStore() !== 'postgres')('on another replica (PostgreSQL)', () => {
  it('a subscriber on replica B that connects before A stores the updates gets each once', async () => {
    const b = await startTestService({ timeScale: 10, databaseUrl: svc.service.ctx.options.databaseUrl });
    const ctx = svc.service.ctx;
    const hold = holdProgressWrites(ctx);
    const fiveOut = announced(ctx, pipelineId, 5);
    let runId = '';
    try {
      runId = (await svc.ok(t, 'POST', `/projects/${projectId}/pipelines/${pipelineId}/run`)).run_id as string;
      await fiveOut;
      // B learns of them by NOTIFY; whether they reach B before or after it connects, none is lost.
      const onB = await WsClient.connect(b, wsUrl(b, t.slug, `/ws/pipelines/${pipelineId}/runs/${runId}`, t.adminToken));
      await onB.count(5);
      expect(pairs(onB)).toEqual(ANNOUNCED);
      hold.release();
      expect((await ended(svc, runId)).status).toBe('succeeded');
      // B's copy is dropped by A's run_stored, which travels after the updates.
      const deadline = Date.now() + 5_000;
      while (streamsOf(b.service.ctx)!.unstoredRuns > 0 && Date.now() < deadline) await sleep(20);
      expect(streamsOf(b.service.ctx)!.unstoredRuns).toBe(0);
      await sleep(100);
      expect(pairs(onB)).toEqual(ALL);
      onB.close();
    } finally {
      hold.release();
      if (runId) await ended(svc, runId);
      await b.close();
    }
  });
});
