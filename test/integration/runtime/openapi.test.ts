import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kind } from '../../../src/kinds/index.js';
import { startTestService, type TestService } from '../../support/service.js';

/** The runtime's operations in the OpenAPI document: status codes, bodies, and the state enums from schemas/. */
let svc: TestService;
let doc: Record<string, any>;

beforeAll(async () => {
  svc = await startTestService();
  doc = (await svc.http.call('GET', `https://localhost:${svc.port}/api/docs/openapi.json`)).body;
});
afterAll(() => svc?.close());

const op = (method: string, path: string) => doc.paths[path]?.[method];
const schemaOf = (o: any, code: string) => o.responses[code].content['application/json'].schema;

describe('runtime operations in the OpenAPI document', () => {
  it('answers 201 for triggers, 200 for the connection test, the plan and the schema', () => {
    for (const path of [
      '/projects/{id}/connectors/{connectorId}/sync',
      '/projects/{id}/pipelines/{pipelineId}/run',
      '/projects/{id}/dbt-projects/{dbtId}/run',
      '/projects/{id}/infrastructure/apply',
    ]) {
      const o = op('post', path);
      expect(Object.keys(o.responses), path).toContain('201');
      expect(Object.keys(schemaOf(o, '201').properties), path).toEqual(expect.arrayContaining(['run_id', 'status', 'started_at']));
    }
    expect(Object.keys(schemaOf(op('post', '/projects/{id}/connectors/{connectorId}/test'), '200').properties).sort()).toEqual([
      'message',
      'success',
    ]);
    expect(schemaOf(op('post', '/projects/{id}/infrastructure/plan'), '200').properties).toHaveProperty('changes');
    expect(schemaOf(op('get', '/projects/{id}/connectors/{connectorId}/schema'), '200').properties).toHaveProperty('error');
  });

  it('takes no body on triggers, and an optional {plan_id} on apply', () => {
    for (const path of [
      '/projects/{id}/connectors/{connectorId}/test',
      '/projects/{id}/connectors/{connectorId}/sync',
      '/projects/{id}/pipelines/{pipelineId}/run',
      '/projects/{id}/dbt-projects/{dbtId}/run',
      '/projects/{id}/infrastructure/plan',
    ]) {
      expect(op('post', path).requestBody, path).toBeUndefined();
    }
    const apply = op('post', '/projects/{id}/infrastructure/apply');
    expect(apply.requestBody.required).toBe(false);
    expect(Object.keys(apply.requestBody.content['application/json'].schema.properties)).toEqual(['plan_id']);
    expect(apply['x-body-optional']).toBeUndefined();
  });

  it('lists every state of runs, steps, connectors and infrastructure resources', () => {
    const run = schemaOf(op('get', '/projects/{id}/pipelines/{pipelineId}/runs/{runId}'), '200');
    expect(run.properties.status.enum).toEqual(['queued', 'running', 'succeeded', 'failed', 'cancelled']);
    const unitStates = ['pending', 'running', 'completed', 'failed', 'skipped'];
    for (const list of ['steps', 'models', 'tables', 'changes'])
      expect(run.properties[list].items.properties.status.enum, list).toEqual(unitStates);
    const connector = schemaOf(op('get', '/projects/{id}/connectors/{resourceId}'), '200');
    expect(connector.properties.status.enum).toEqual(['created', 'active', 'syncing', 'error', 'paused']);
    const infra = schemaOf(op('get', '/projects/{id}/infrastructure/{resourceId}'), '200');
    expect(infra.properties.status.enum).toEqual(['pending', 'provisioning', 'provisioned', 'updating', 'deleting', 'failed']);
    for (const path of ['/projects/{id}/pipelines/{pipelineId}', '/projects/{id}/dbt-projects/{resourceId}']) {
      const o = op('get', path) ?? op('get', path.replace('{pipelineId}', '{resourceId}'));
      expect(schemaOf(o, '200').properties.last_run_status.enum).toEqual(['running', 'succeeded', 'failed', 'cancelled', null]);
    }
  });

  it('keeps the copies in schemas/ consistent: trigger status = run status, apply changes = plan changes', () => {
    expect(kind('run_trigger').schema.properties!.status.enum).toEqual(kind('run').schema.properties!.status.enum);
    expect(kind('infrastructure_apply').schema.properties!.status.enum).toEqual(kind('run').schema.properties!.status.enum);
    const strip = (s: unknown) => JSON.parse(JSON.stringify(s), (k, v) => (k === 'description' ? undefined : v));
    expect(strip(kind('infrastructure_apply').schema.properties!.changes)).toEqual(
      strip(kind('infrastructure_plan').schema.properties!.changes),
    );
  });
});
