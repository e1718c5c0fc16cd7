import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { connectorBody, createDeps, expectError, expectNoStackTrace, expectValidation, type Deps } from './fixtures.js';

let svc: TestService;
let t: TestTenant;
let deps: Deps;
let connectors: string;
let pipelines: string;

beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  const project = await svc.project(t, 'validation');
  deps = await createDeps(svc, t, project.id);
  connectors = `/projects/${project.id}/connectors`;
  pipelines = `/projects/${project.id}/pipelines`;
});
afterAll(() => svc?.close());

describe('request body validation (400 validation_error with one detail per invalid field)', () => {
  it('names a missing required field', async () => {
    const error = expectValidation(await svc.call(t, 'POST', connectors, { body: { connector_type: 'postgresql' } }), ['name']);
    expect(error.details![0].message).toMatch(/required/);
    expect(error.message).toContain('name');
  });

  it('names every missing required field at once', async () => {
    expectValidation(await svc.call(t, 'POST', connectors, { body: {} }), ['name', 'connector_type']);
  });

  it('names a wrong type, with the nested path', async () => {
    const error = expectValidation(await svc.call(t, 'POST', connectors, { body: connectorBody('wt', { config: { port: 'five' } }) }), [
      'config.port',
    ]);
    expect(error.details![0].message).toMatch(/integer/);
  });

  it('names an unknown field, top level and nested', async () => {
    const top = expectValidation(await svc.call(t, 'POST', connectors, { body: connectorBody('uf', { colour: 'blue' }) }), ['colour']);
    expect(top.details![0].message).toMatch(/not a known field/);
    expectValidation(await svc.call(t, 'POST', connectors, { body: connectorBody('uf2', { credentials: { user: 'x' } }) }), [
      'credentials.user',
    ]);
  });

  it('names a bad enum value and lists the allowed ones', async () => {
    const error = expectValidation(await svc.call(t, 'POST', connectors, { body: { name: 'enum', connector_type: 'oracle' } }), [
      'connector_type',
    ]);
    expect(error.details![0].message).toContain('"postgresql"');
  });

  it.each([
    ['61 * * * *', /cron/],
    ['* * * *', /five-field/],
    ['* * * * * *', /five-field/],
    ['every hour', /cron/],
  ])('rejects the cron expression %j on schedule', async (schedule, message) => {
    const error = expectValidation(await svc.call(t, 'POST', connectors, { body: connectorBody(`cron-${schedule}`, { schedule }) }), [
      'schedule',
    ]);
    expect(error.details![0].message).toMatch(message);
    const pipeline = expectValidation(
      await svc.call(t, 'POST', pipelines, {
        body: { name: 'p', schedule, steps: [{ name: 's', type: 'connector_sync', connector_id: deps.connectorId }] },
      }),
      ['schedule'],
    );
    expect(pipeline.details![0].message).toMatch(message);
  });

  it('accepts and normalises valid cron expressions', async () => {
    const created = await svc.ok(t, 'POST', connectors, { body: connectorBody('cron-ok', { schedule: ' 0   6 * * 1-5 ' }) });
    expect(created.schedule).toBe('0 6 * * 1-5');
  });

  it('names nested array fields like steps[0].type', async () => {
    const error = expectValidation(
      await svc.call(t, 'POST', pipelines, { body: { name: 'bad-steps', steps: [{ name: 'a', type: 'teleport' }] } }),
      ['steps[0].type'],
    );
    expect(error.details![0].message).toMatch(/one of/);
  });

  it('names a missing step type once, not the fields that depend on it', async () => {
    expectValidation(await svc.call(t, 'POST', pipelines, { body: { name: 'no-type', steps: [{ name: 'a' }] } }), ['steps[0].type']);
  });

  it('names a missing field required by the step type', async () => {
    expectValidation(
      await svc.call(t, 'POST', pipelines, {
        body: {
          name: 'no-conn',
          steps: [
            { name: 'a', type: 'dbt_run', dbt_project_id: deps.dbtProjectId },
            { name: 'b', type: 'connector_sync' },
          ],
        },
      }),
      ['steps[1].connector_id'],
    );
  });

  it('gives one detail per invalid field even when a value breaks several rules', async () => {
    const error = expectValidation(await svc.call(t, 'POST', connectors, { body: { name: '', connector_type: 'postgresql' } }), ['name']);
    expect(error.details).toHaveLength(1);
  });

  it('reports several invalid fields together, each once', async () => {
    expectValidation(
      await svc.call(t, 'POST', connectors, {
        body: { name: 'many', connector_type: 'nope', config: { port: 70000, host: 5 }, schedule: '61 * * * *', extra: true },
      }),
      ['connector_type', 'config.port', 'config.host', 'schedule', 'extra'],
    );
  });

  it('validates PATCH bodies too', async () => {
    const created = await svc.ok(t, 'POST', connectors, { body: connectorBody('patch-me') });
    expectValidation(await svc.call(t, 'PATCH', `${connectors}/${created.id}`, { body: { config: { port: 0 } } }), ['config.port']);
    expectValidation(await svc.call(t, 'PATCH', `${connectors}/${created.id}`, { body: { schedule: '* * * *' } }), ['schedule']);
    expectValidation(await svc.call(t, 'PATCH', `${connectors}/${created.id}`, { body: { status: 'active' } }), ['status']);
    expectValidation(await svc.call(t, 'PATCH', `${connectors}/${created.id}`, { body: { id: 'con_other' } }), ['id']);
    // Nothing was changed by the rejected requests.
    const after = await svc.ok(t, 'GET', `${connectors}/${created.id}`);
    expect(after).toEqual(created);
  });

  it('caps maps and strings a tenant could grow without bound (labels, config maps, table names): 400 naming the field', async () => {
    const labels = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`l${i}`, 'x']));
    const tooMany = await svc.call(t, 'POST', connectors, { body: connectorBody('many-labels', { labels }) });
    expect(expectError(tooMany, 400, 'validation_error').details).toEqual([
      { field: 'labels', message: 'must NOT have more than 64 properties' },
    ]);
    const longTable = await svc.call(t, 'POST', connectors, {
      body: connectorBody('long-table', { selected_tables: [`s.${'a'.repeat(300)}`] }),
    });
    expect(expectError(longTable, 400, 'validation_error').details).toEqual([
      { field: 'selected_tables[0]', message: 'must NOT have more than 256 characters' },
    ]);
    const config = Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v']));
    const infra = await svc.call(t, 'POST', connectors.replace('/connectors', '/infrastructure'), {
      body: { name: 'wide', resource_type: 'bucket', provider: 'aws', region: 'us-east-1', config },
    });
    expect(expectError(infra, 400, 'validation_error').details).toEqual([
      { field: 'config', message: 'must NOT have more than 32 properties' },
    ]);
    // At the caps: accepted.
    const atCap = Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`l${i}`, 'x']));
    expect((await svc.call(t, 'POST', connectors, { body: connectorBody('at-cap', { labels: atCap }) })).status).toBe(201);
  });

  it('rejects a body that is not an object', async () => {
    expectError(
      await svc.call(t, 'POST', connectors, { raw: '[1,2]', headers: { 'content-type': 'application/json' } }),
      400,
      'validation_error',
    );
    expectError(
      await svc.call(t, 'POST', connectors, { raw: '"text"', headers: { 'content-type': 'application/json' } }),
      400,
      'validation_error',
    );
  });

  it('rejects a missing body on create', async () => {
    const error = expectError(
      await svc.call(t, 'POST', connectors, { headers: { 'content-type': 'application/json' } }),
      400,
      'validation_error',
    );
    expect(error.details?.length).toBeGreaterThan(0);
  });
});

describe('transport errors keep the envelope', () => {
  it('rejects malformed JSON with 400 validation_error', async () => {
    const error = expectError(
      await svc.call(t, 'POST', connectors, { raw: '{"name": "x",', headers: { 'content-type': 'application/json' } }),
      400,
      'validation_error',
    );
    expect(error.details).toEqual([{ field: '(body)', message: expect.any(String) }]);
  });

  it('says what is wrong with malformed JSON without quoting the body', async () => {
    const raw = '{"name": hunter2-secret}';
    const res = await svc.call(t, 'POST', connectors, { raw, headers: { 'content-type': 'application/json' } });
    const error = expectError(res, 400, 'validation_error');
    expect(error.message).toBe("Body is not valid JSON: Unexpected token 'h'");
    expect(res.text).not.toContain('hunter2');
  });

  it('rejects a compressed body or a charset other than UTF-8 with 415 naming the header', async () => {
    const json = JSON.stringify(connectorBody('encoded'));
    const gzipped = await svc.call(t, 'POST', connectors, {
      raw: gzipSync(json),
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    });
    const gzipError = expectError(gzipped, 415, 'validation_error');
    expect(gzipError.details).toEqual([{ field: 'Content-Encoding', message: expect.stringContaining('"gzip" is not supported') }]);
    expect(gzipped.text).not.toMatch(/\\u001f|\u001f/);
    const latin1 = await svc.call(t, 'POST', connectors, {
      raw: Buffer.from(json, 'latin1'),
      headers: { 'content-type': 'application/json; charset=ISO-8859-1' },
    });
    expect(expectError(latin1, 415, 'validation_error').details).toEqual([
      { field: 'Content-Type', message: 'charset "iso-8859-1" is not supported: JSON bodies are UTF-8' },
    ]);
    // Bytes that are not UTF-8 are refused, not replaced with U+FFFD (a name other than the one sent).
    const invalid = await svc.call(t, 'POST', connectors, {
      raw: Buffer.concat([Buffer.from('{"name":"caf'), Buffer.from([0xe9]), Buffer.from('","connector_type":"mysql"}')]),
      headers: { 'content-type': 'application/json' },
    });
    expect(expectError(invalid, 400, 'validation_error').details).toEqual([{ field: '(body)', message: 'is not valid UTF-8' }]);
    const utf8 = await svc.call(t, 'POST', connectors, { raw: json, headers: { 'content-type': 'application/json; charset="UTF-8"' } });
    expect(utf8.status, utf8.text).toBe(201);
    const list = await svc.ok(t, 'GET', connectors);
    expect(list.data.filter((c: { name: string }) => c.name === 'encoded')).toHaveLength(1);
  });

  it('rejects a non-JSON content type with 415', async () => {
    const res = await svc.call(t, 'POST', connectors, { raw: 'name=x', headers: { 'content-type': 'text/plain' } });
    const error = expectError(res, 415, 'validation_error');
    expect(error.message).toMatch(/application\/json/);
  });

  it('rejects a body over 1 MiB with 413', async () => {
    const big = JSON.stringify(connectorBody('big', { labels: { blob: 'x'.repeat(1024 * 1024 + 10) } }));
    const res = await svc.call(t, 'POST', connectors, { raw: big, headers: { 'content-type': 'application/json' } });
    expectError(res, 413, 'validation_error');
    // The service is still healthy and nothing was created.
    const list = await svc.ok(t, 'GET', connectors);
    expect(list.data.map((c: { name: string }) => c.name)).not.toContain('big');
  });

  it('answers an unknown route with 404 resource_not_found', async () => {
    for (const [method, path] of [
      ['GET', '/no-such-thing'],
      ['GET', `/projects/${deps.projectId}/widgets`],
      ['POST', '/projects/x/y/z'],
      ['DELETE', '/projects'],
    ]) {
      const res = await svc.call(t, method, path);
      expectError(res, 404, 'resource_not_found');
      expect(res.headers['x-request-id']).toMatch(/^req_/);
    }
  });

  it('answers an undecodable URL and an over-long id with the envelope and a request id', async () => {
    for (const path of ['/%E0%A4%A', `/projects/${'p'.repeat(150)}/connectors`]) {
      const res = await svc.call(t, 'GET', path);
      expectError(res, 400, 'validation_error');
      expect(res.headers['x-request-id']).toMatch(/^req_/);
    }
  });

  it('answers a missing resource and a missing project with 404 resource_not_found', async () => {
    expectError(await svc.call(t, 'GET', `${connectors}/con_doesnotexist`), 404, 'resource_not_found');
    expectError(await svc.call(t, 'PATCH', `${connectors}/con_doesnotexist`, { body: { labels: {} } }), 404, 'resource_not_found');
    expectError(await svc.call(t, 'GET', '/projects/prj_doesnotexist/connectors'), 404, 'resource_not_found');
    expectError(
      await svc.call(t, 'POST', '/projects/prj_doesnotexist/connectors', { body: connectorBody('x') }),
      404,
      'resource_not_found',
    );
  });

  it('never puts a stack trace in an error body', async () => {
    const responses = await Promise.all([
      svc.call(t, 'POST', connectors, { raw: '{', headers: { 'content-type': 'application/json' } }),
      svc.call(t, 'POST', connectors, { raw: '\u0000\u0001', headers: { 'content-type': 'application/json' } }),
      svc.call(t, 'POST', connectors, { raw: 'x', headers: { 'content-type': 'application/xml' } }),
      svc.call(t, 'POST', connectors, { body: { name: { deeply: ['nested'] }, connector_type: 1 } }),
      svc.call(t, 'GET', `${connectors}?limit=abc`),
      svc.call(t, 'GET', `${connectors}?cursor=%00%ff`),
      svc.call(t, 'GET', `/projects/${encodeURIComponent('../../etc')}/connectors`),
      svc.call(t, 'GET', '/%E0%A4%A'),
      svc.call(t, 'GET', `/projects/${'x'.repeat(500)}`),
    ]);
    for (const res of responses) {
      expect(res.status, res.text).toBeGreaterThanOrEqual(400);
      expect(res.status, res.text).toBeLessThan(500);
      expect(res.body?.error?.code, res.text).toEqual(expect.any(String));
      expectNoStackTrace(res.text);
    }
  });
});
