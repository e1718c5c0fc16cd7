import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kind } from '../../../src/kinds/index.js';
import { createAjv } from '../../../src/kinds/validator.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { expectError, waitForRun, type Run } from './helpers.js';

/**
 * Infrastructure plan and apply: desired (the resources as configured) against provisioned (the
 * snapshot recorded by applies). Simulated provisioning at 4x (a bucket takes ~0.5 s), so the intermediate states show.
 */
let svc: TestService;
let t: TestTenant;
let projectId: string;
let base: string;

const planShape = createAjv().compile({
  ...kind('infrastructure_plan').responseSchema,
  required: Object.keys(kind('infrastructure_plan').responseSchema.properties!),
});

beforeAll(async () => {
  svc = await startTestService({ timeScale: 4 });
  t = await svc.tenant();
  projectId = (await svc.project(t, 'runtime-infra')).id;
  base = `/projects/${projectId}/infrastructure`;
});
afterAll(() => svc?.close());

interface Plan {
  plan_id: string;
  fingerprint: string;
  summary: { create: number; update: number; delete: number; unchanged: number };
  changes: {
    action: string;
    resource_id: string;
    name: string;
    resource_type: string;
    changed_fields: string[];
    before: Record<string, unknown> | null;
    after: Record<string, unknown> | null;
  }[];
}

const plan = () => svc.ok<Plan>(t, 'POST', `${base}/plan`, {}, 200);
const status = async (id: string) => (await svc.ok(t, 'GET', `${base}/${id}`)).status as string;
const applyRun = (runId: string) => waitForRun(svc, t, `${base}/runs/${runId}`);

describe('infrastructure plan and apply', () => {
  let wh: { id: string };
  let bucket: { id: string };
  let firstPlan: Plan;

  beforeAll(async () => {
    wh = await svc.ok(t, 'POST', base, {
      body: { name: 'wh', resource_type: 'warehouse', provider: 'snowflake', region: 'eu-west-1', config: { size: 'XSMALL' } },
    });
    bucket = await svc.ok(t, 'POST', base, {
      body: { name: 'raw', resource_type: 'bucket', provider: 'aws', region: 'eu-west-1', labels: { team: 'data' } },
    });
  });

  it('plans a create per new resource, with before null and after as configured; the same state gives the same plan', async () => {
    expect([await status(wh.id), await status(bucket.id)]).toEqual(['pending', 'pending']);
    firstPlan = await plan();
    expect(planShape(firstPlan), JSON.stringify(planShape.errors)).toBe(true);
    expect(firstPlan.plan_id).toMatch(/^plan_[0-9a-f]{24}$/);
    expect(firstPlan.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(firstPlan.plan_id).toBe(`plan_${firstPlan.fingerprint.slice(0, 24)}`);
    expect(firstPlan.summary).toEqual({ create: 2, update: 0, delete: 0, unchanged: 0 });
    expect(firstPlan.changes).toEqual([
      {
        action: 'create',
        resource_id: wh.id,
        name: 'wh',
        resource_type: 'warehouse',
        changed_fields: ['name', 'resource_type', 'provider', 'region', 'config', 'labels'],
        before: null,
        after: {
          name: 'wh',
          resource_type: 'warehouse',
          provider: 'snowflake',
          region: 'eu-west-1',
          config: { size: 'XSMALL' },
          labels: {},
        },
      },
      {
        action: 'create',
        resource_id: bucket.id,
        name: 'raw',
        resource_type: 'bucket',
        changed_fields: ['name', 'resource_type', 'provider', 'region', 'config', 'labels'],
        before: null,
        after: { name: 'raw', resource_type: 'bucket', provider: 'aws', region: 'eu-west-1', config: {}, labels: { team: 'data' } },
      },
    ]);
    expect((await plan()).plan_id).toBe(firstPlan.plan_id);
    // Planning changes nothing.
    expect([await status(wh.id), await status(bucket.id)]).toEqual(['pending', 'pending']);
  });

  it('a plan made stale by a change since is 409 on apply, and nothing is applied', async () => {
    await svc.ok(t, 'PATCH', `${base}/${wh.id}`, { body: { config: { size: 'SMALL' } } }, 200);
    const res = await svc.call(t, 'POST', `${base}/apply`, { body: { plan_id: firstPlan.plan_id } });
    expectError(res, 409, 'conflict', new RegExp(`Plan ${firstPlan.plan_id} is stale`));
    expect([await status(wh.id), await status(bucket.id)]).toEqual(['pending', 'pending']);
    expect((await svc.ok(t, 'GET', `${base}/runs`)).data).toEqual([]);
    const current = await plan();
    expect(current.plan_id).not.toBe(firstPlan.plan_id);
    expect(current.changes[0].after).toMatchObject({ config: { size: 'SMALL' } });
    firstPlan = current;
  });

  it('applies the current plan: pending -> provisioning -> provisioned, one apply at a time; then the plan is empty', async () => {
    const res = await svc.call(t, 'POST', `${base}/apply`, { body: { plan_id: firstPlan.plan_id } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ status: 'running', plan_id: firstPlan.plan_id, changes: firstPlan.changes });
    expect(Object.keys(res.body).sort()).toEqual(['changes', 'plan_id', 'run_id', 'started_at', 'status']);
    expect([await status(wh.id), await status(bucket.id)]).toEqual(['provisioning', 'provisioning']);
    expectError(await svc.call(t, 'POST', `${base}/apply`), 409, 'conflict', /already running/);
    const run = await applyRun(res.body.run_id);
    expect(run).toMatchObject({
      run_type: 'infrastructure_apply',
      resource_id: projectId,
      status: 'succeeded',
      plan_id: firstPlan.plan_id,
      simulated: true,
      error: null,
    });
    expect(run.changes.map((c) => [c.name, c.action, c.status])).toEqual([
      ['wh', 'create', 'completed'],
      ['raw', 'create', 'completed'],
    ]);
    expect([await status(wh.id), await status(bucket.id)]).toEqual(['provisioned', 'provisioned']);
    const after = await plan();
    expect(after.changes).toEqual([]);
    expect(after.summary).toEqual({ create: 0, update: 0, delete: 0, unchanged: 2 });
    // Re-applying the applied plan: stale. Applying the empty current plan: a run that has already succeeded.
    expectError(await svc.call(t, 'POST', `${base}/apply`, { body: { plan_id: firstPlan.plan_id } }), 409, 'conflict', /stale/);
    const noop = await svc.ok(t, 'POST', `${base}/apply`);
    expect(noop).toMatchObject({ status: 'succeeded', plan_id: after.plan_id, changes: [] });
    expect((await svc.ok(t, 'GET', `${base}/runs/${noop.run_id}`)).status).toBe('succeeded');
  });

  it('a changed resource plans an update with before and after: provisioned -> updating -> provisioned', async () => {
    await svc.ok(
      t,
      'PATCH',
      `${base}/${bucket.id}`,
      { body: { labels: { team: 'platform' }, config: { storage_class: 'STANDARD' } } },
      200,
    );
    const p = await plan();
    expect(p.summary).toEqual({ create: 0, update: 1, delete: 0, unchanged: 1 });
    expect(p.changes).toEqual([
      {
        action: 'update',
        resource_id: bucket.id,
        name: 'raw',
        resource_type: 'bucket',
        changed_fields: ['config', 'labels'],
        before: { name: 'raw', resource_type: 'bucket', provider: 'aws', region: 'eu-west-1', config: {}, labels: { team: 'data' } },
        after: {
          name: 'raw',
          resource_type: 'bucket',
          provider: 'aws',
          region: 'eu-west-1',
          config: { storage_class: 'STANDARD' },
          labels: { team: 'platform' },
        },
      },
    ]);
    // Its change waits for an apply: pending (progressing), no longer provisioned (healthy); the
    // warehouse, unchanged, stays provisioned.
    expect(await status(bucket.id)).toBe('pending');
    expect(await status(wh.id)).toBe('provisioned');
    const started = await svc.ok(t, 'POST', `${base}/apply`, { body: {} });
    expect(started.plan_id).toBe(p.plan_id);
    expect(await status(bucket.id)).toBe('updating');
    expect(await status(wh.id)).toBe('provisioned');
    expect((await applyRun(started.run_id)).status).toBe('succeeded');
    expect(await status(bucket.id)).toBe('provisioned');
    expect((await plan()).changes).toEqual([]);
  });

  it('a change put back before any apply is provisioned again at once; a PATCH that changes nothing leaves it provisioned', async () => {
    await svc.ok(t, 'PATCH', `${base}/${bucket.id}`, { body: { labels: { team: 'platform', extra: 'x' } } }, 200);
    expect(await status(bucket.id)).toBe('pending');
    await svc.ok(t, 'PATCH', `${base}/${bucket.id}`, { body: { labels: { team: 'platform' } } }, 200);
    // Back to what is provisioned: nothing waits, nothing for a plan.
    expect(await status(bucket.id)).toBe('provisioned');
    expect((await plan()).changes).toEqual([]);
    await svc.ok(t, 'PATCH', `${base}/${bucket.id}`, { body: { labels: { team: 'platform' } } }, 200);
    expect(await status(bucket.id)).toBe('provisioned');
  });

  it('a deleted resource plans a delete of what was provisioned; applying it empties the snapshot', async () => {
    await svc.ok(t, 'DELETE', `${base}/${wh.id}`);
    const p = await plan();
    expect(p.summary).toEqual({ create: 0, update: 0, delete: 1, unchanged: 1 });
    expect(p.changes).toEqual([
      {
        action: 'delete',
        resource_id: wh.id,
        name: 'wh',
        resource_type: 'warehouse',
        changed_fields: ['name', 'resource_type', 'provider', 'region', 'config', 'labels'],
        before: {
          name: 'wh',
          resource_type: 'warehouse',
          provider: 'snowflake',
          region: 'eu-west-1',
          config: { size: 'SMALL' },
          labels: {},
        },
        after: null,
      },
    ]);
    // A resource created after the plan makes it stale too.
    const late = await svc.ok(t, 'POST', base, {
      body: { name: 'late', resource_type: 'network', provider: 'gcp', region: 'europe-west1' },
    });
    expectError(await svc.call(t, 'POST', `${base}/apply`, { body: { plan_id: p.plan_id } }), 409, 'conflict', /stale/);
    const q = await plan();
    expect(q.changes.map((c) => [c.action, c.name])).toEqual([
      ['create', 'late'],
      ['delete', 'wh'],
    ]);
    const started = await svc.ok(t, 'POST', `${base}/apply`, { body: { plan_id: q.plan_id } });
    const run = await applyRun(started.run_id);
    expect(run.changes.map((c) => [c.name, c.action, c.status])).toEqual([
      ['late', 'create', 'completed'],
      ['wh', 'delete', 'completed'],
    ]);
    expect(await status(late.id)).toBe('provisioned');
    expect((await plan()).summary).toEqual({ create: 0, update: 0, delete: 0, unchanged: 2 });
  });

  it('plan and apply need read-write and are audited; apply history is readable with read-only; bad bodies are 400', async () => {
    const ro = await svc.apiKey(t, projectId, 'read-only');
    expectError(await svc.call(t, 'POST', `${base}/plan`, { token: ro.key }), 403, 'forbidden');
    expectError(await svc.call(t, 'POST', `${base}/apply`, { token: ro.key }), 403, 'forbidden');
    const history = await svc.ok(t, 'GET', `${base}/runs`, { token: ro.key });
    expect(history.data.length).toBe(4);
    for (const r of history.data as Run[]) expect(r.run_type).toBe('infrastructure_apply');
    expect((await svc.call(t, 'POST', `${base}/apply`, { body: { plan: 'x' } })).status).toBe(400);
    expect((await svc.call(t, 'POST', `${base}/apply`, { body: { plan_id: 42 } })).status).toBe(400);
    expectError(await svc.call(t, 'POST', `/projects/prj_nope/infrastructure/plan`), 404, 'resource_not_found');
    const logs = (
      await svc.ok(t, 'GET', `/projects/${projectId}/audit-logs`, { query: { resource_type: 'infrastructure_resource', limit: 100 } })
    ).data;
    const actions = logs.map((e: { action: string; status_code: number }) => `${e.action} ${e.status_code}`);
    expect(actions).toContain('infrastructure_resource.plan 200');
    expect(actions).toContain('infrastructure_resource.apply 201');
    expect(actions).toContain('infrastructure_resource.apply 409');
  });
});

describe('a provisioning the simulated cloud refuses', () => {
  it('fails that change with the reason on the resource (last_error), provisions the rest, and is planned again until fixed', async () => {
    const pid = (await svc.project(t, 'runtime-infra-failure')).id;
    const at = `/projects/${pid}/infrastructure`;
    const bad = await svc.ok(t, 'POST', at, { body: { name: 'lake', resource_type: 'bucket', provider: 'aws', region: 'mars-1' } });
    const good = await svc.ok(t, 'POST', at, { body: { name: 'net', resource_type: 'network', provider: 'azure', region: 'westeurope' } });
    expect(bad.last_error).toBeNull();
    const started = await svc.ok(t, 'POST', `${at}/apply`, { body: {} });
    const run = await waitForRun(svc, t, `${at}/runs/${started.run_id}`);
    expect(run.status).toBe('failed');
    expect(run.error).toMatch(/^1 of 2 changes failed: lake: aws has no region "mars-1"/);
    expect(run.changes.map((c) => [c.name, c.status])).toEqual([
      ['lake', 'failed'],
      ['net', 'completed'],
    ]);
    const failed = await svc.ok(t, 'GET', `${at}/${bad.id}`);
    expect([failed.status, failed.last_error]).toEqual(['failed', expect.stringMatching(/aws has no region "mars-1"/)]);
    expect((await svc.ok(t, 'GET', `${at}/${good.id}`)).status).toBe('provisioned');
    // Nothing was provisioned for it: the next plan proposes it again.
    const again = await svc.ok<Plan>(t, 'POST', `${at}/plan`, {}, 200);
    expect(again.changes.map((c) => [c.action, c.name])).toEqual([['create', 'lake']]);
    // The region cannot change in place: the fix is a new resource in a known region.
    await svc.ok(t, 'DELETE', `${at}/${bad.id}`);
    const fixed = await svc.ok(t, 'POST', at, { body: { name: 'lake', resource_type: 'bucket', provider: 'aws', region: 'eu-west-1' } });
    const second = await svc.ok(t, 'POST', `${at}/apply`, { body: {} });
    expect((await waitForRun(svc, t, `${at}/runs/${second.run_id}`)).status).toBe('succeeded');
    expect(await svc.ok(t, 'GET', `${at}/${fixed.id}`)).toMatchObject({ status: 'provisioned', last_error: null });
  });
});
