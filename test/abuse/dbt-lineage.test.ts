import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { BYSTANDER_MAX_MS, whileServingOther } from './support.js';

/**
 * A dbt model's depends_on had no cap: 480 models each depending on every model before it (114,960
 * edges in a 0.7 MB body) made a lineage answer of 4.4 MB, built in one go in 160-250 ms, and four
 * readers at once held every other tenant for about 650 ms. depends_on is now at most 50 per model
 * (x-max-items, 422 like every cap): a project at both caps (1,000 models) has at most 48,725
 * dependency edges, a 1.9 MB answer in about 55 ms.
 */
let svc: TestService;
let attacker: TestTenant;
let bystander: TestTenant;
let base: string;

beforeAll(async () => {
  svc = await startTestService();
  [attacker, bystander] = await Promise.all([svc.tenant(), svc.tenant()]);
  await svc.project(bystander, 'calm');
  base = `/projects/${(await svc.project(attacker, 'lineage')).id}`;
});
afterAll(() => svc?.close());

/** n models, each depending on the `deps` models before it (all of them when there are fewer). */
const models = (n: number, deps: number) =>
  Array.from({ length: n }, (_, i) => ({
    name: `m${i.toString(36)}`,
    depends_on: Array.from({ length: Math.min(i, deps) }, (_, k) => `m${(i - 1 - k).toString(36)}`),
  }));

const project = (name: string, declared: unknown[]) => ({ name, repository: 'https://git.example.com/a.git', models: declared });

function expect422(res: { status: number; body: any }, field: string) {
  expect(res.status, JSON.stringify(res.body).slice(0, 500)).toBe(422);
  expect(res.body.error.code).toBe('unprocessable_entity');
  expect(res.body.error.details).toEqual([expect.objectContaining({ field })]);
  expect(res.body.error.message).toContain(`${field} has 51 items; at most 50 are allowed`);
}

describe('depends_on of a dbt model', () => {
  it('51 is 422 on that model, on create and on PATCH, and nothing is stored', async () => {
    expect422(await svc.call(attacker, 'POST', `${base}/dbt-projects`, { body: project('wide', models(52, 51)) }), 'models[51].depends_on');
    const small = await svc.ok<{ id: string }>(attacker, 'POST', `${base}/dbt-projects`, { body: project('small', models(52, 50)) });
    expect422(
      await svc.call(attacker, 'PATCH', `${base}/dbt-projects/${small.id}`, { body: { models: models(52, 51) } }),
      'models[51].depends_on',
    );
    const stored = await svc.ok<{ data: { name: string; models: { depends_on: string[] }[] }[] }>(attacker, 'GET', `${base}/dbt-projects`);
    expect(stored.data.map((d) => d.name)).toEqual(['small']);
    expect(Math.max(...stored.data[0].models.map((m) => m.depends_on.length))).toBe(50);
    await svc.ok(attacker, 'DELETE', `${base}/dbt-projects/${small.id}`, {}, 204);
  });

  it("the audit's 480 models in a full chain (114,960 edges) are refused", async () => {
    const { result, probe } = await whileServingOther(svc, bystander, () =>
      svc.call(attacker, 'POST', `${base}/dbt-projects`, { body: project('chain', models(480, 479)) }),
    );
    expect(result.status).toBe(422);
    expect(result.body.error.details[0].field).toBe('models[51].depends_on');
    expect(probe.failures).toEqual([]);
  });

  it('a project at both caps (1,000 models of 50) has its lineage read, four at once, while another tenant is served', async () => {
    const declared = models(1000, 50);
    const dbt = await svc.ok<{ id: string }>(attacker, 'POST', `${base}/dbt-projects`, { body: project('at-cap', declared) });
    const { result, probe } = await whileServingOther(svc, bystander, () =>
      Promise.all(
        [0, 1, 2, 3].map(() => svc.ok<{ nodes: unknown[]; edges: unknown[] }>(attacker, 'GET', `${base}/dbt-projects/${dbt.id}/lineage`)),
      ),
    );
    for (const graph of result) {
      expect(graph.nodes).toHaveLength(1000);
      expect(graph.edges).toHaveLength(48_725);
    }
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
  }, 60_000);
});

describe('in YAML', () => {
  const dir = mkdtempSync(join(tmpdir(), 'dp-dbt-caps-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const yaml = (deps: number) =>
    [
      'apiVersion: dataplatform/v1',
      'kind: Project',
      'metadata: { name: caps }',
      '---',
      'apiVersion: dataplatform/v1',
      'kind: DbtProject',
      'metadata: { name: wide, project: caps }',
      'spec:',
      '  repository: https://git.example.com/a.git',
      '  models:',
      ...Array.from({ length: deps }, (_, i) => `    - { name: up_${i} }`),
      `    - { name: wide, depends_on: [${Array.from({ length: deps }, (_, i) => `up_${i}`).join(', ')}] }`,
      '',
    ].join('\n');

  it('dpctl validate takes 50 dependencies and refuses 51 at that model', () => {
    writeFileSync(join(dir, 'ok.yaml'), yaml(50));
    expect(loadConfig([join(dir, 'ok.yaml')]).errors).toEqual([]);
    writeFileSync(join(dir, 'wide.yaml'), yaml(51));
    const { errors } = loadConfig([join(dir, 'wide.yaml')]);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ field: 'spec.models[51].depends_on', message: expect.stringContaining('50') });
  });
});
