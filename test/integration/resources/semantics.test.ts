import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { EXAMPLES, connectorBody, createDeps, expectError, type Deps } from './fixtures.js';

let svc: TestService;
let t: TestTenant;
let deps: Deps;
let p: string;

beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  const project = await svc.project(t, 'semantics');
  deps = await createDeps(svc, t, project.id);
  p = `/projects/${project.id}`;
});
afterAll(() => svc?.close());

const step = (name: string, depends_on: string[] = []) => ({ name, type: 'connector_sync', connector_id: deps.connectorId, depends_on });

describe('name conflicts', () => {
  it('rejects a duplicate name in the same project with 409 and allows it in another project', async () => {
    const first = await svc.ok(t, 'POST', `${p}/connectors`, { body: connectorBody('dup') });
    const again = await svc.call(t, 'POST', `${p}/connectors`, { body: connectorBody('dup', { connector_type: 'mysql' }) });
    expect(expectError(again, 409, 'conflict').message).toContain('dup');
    const other = await svc.project(t, 'semantics-other');
    const elsewhere = await svc.ok(t, 'POST', `/projects/${other.id}/connectors`, { body: connectorBody('dup') });
    expect(elsewhere.id).not.toBe(first.id);
    // Same name, different kind, same project: fine too.
    await svc.ok(t, 'POST', `${p}/pipelines`, { body: { name: 'dup', steps: [step('s')] } });
    const list = await svc.ok(t, 'GET', `${p}/connectors`);
    expect(list.data.filter((c: { name: string }) => c.name === 'dup')).toHaveLength(1);
  });

  it('rejects a rename onto an existing name with 409 and keeps both unchanged', async () => {
    const a = await svc.ok(t, 'POST', `${p}/connectors`, { body: connectorBody('rename-a') });
    const b = await svc.ok(t, 'POST', `${p}/connectors`, { body: connectorBody('rename-b') });
    expectError(await svc.call(t, 'PATCH', `${p}/connectors/${b.id}`, { body: { name: 'rename-a' } }), 409, 'conflict');
    expect((await svc.ok(t, 'GET', `${p}/connectors/${b.id}`)).name).toBe('rename-b');
    expect((await svc.ok(t, 'GET', `${p}/connectors/${a.id}`)).name).toBe('rename-a');
    // Renaming to a free name, and to its own name, works.
    expect((await svc.ok(t, 'PATCH', `${p}/connectors/${b.id}`, { body: { name: 'rename-c' } })).name).toBe('rename-c');
    expect((await svc.ok(t, 'PATCH', `${p}/connectors/${b.id}`, { body: { name: 'rename-c' } })).name).toBe('rename-c');
  });

  it('gives exactly one 201 when the same name is created concurrently', async () => {
    const results = await Promise.all(
      Array.from({ length: 8 }, () => svc.call(t, 'POST', `${p}/connectors`, { body: connectorBody('race') })),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 201)) expectError(r, 409, 'conflict');
  });

  it('treats user emails case-insensitively for conflicts', async () => {
    await svc.ok(t, 'POST', '/users', { body: { email: 'case@example.com', role: 'read-only' } });
    const again = await svc.call(t, 'POST', '/users', { body: { email: 'CASE@Example.com', role: 'admin' } });
    expect(expectError(again, 409, 'conflict').message).toBe('A user with email "case@example.com" already exists');
  });
});

describe('immutable fields', () => {
  it('rejects a change of connector_type with 422 naming the field; the same value is fine', async () => {
    const c = await svc.ok(t, 'POST', `${p}/connectors`, { body: connectorBody('immut') });
    const res = await svc.call(t, 'PATCH', `${p}/connectors/${c.id}`, { body: { connector_type: 'mysql', labels: { x: 'y' } } });
    const error = expectError(res, 422, 'unprocessable_entity');
    expect(error.message).toContain('connector_type');
    expect(error.details).toEqual([{ field: 'connector_type', message: expect.any(String) }]);
    const unchanged = await svc.ok(t, 'GET', `${p}/connectors/${c.id}`);
    expect(unchanged).toEqual(c);
    const same = await svc.ok(t, 'PATCH', `${p}/connectors/${c.id}`, { body: { connector_type: 'postgresql', labels: { x: 'y' } } });
    expect(same).toMatchObject({ connector_type: 'postgresql', labels: { x: 'y' } });
  });

  it('names every immutable field that changes', async () => {
    const r = await svc.ok(t, 'POST', `${p}/infrastructure`, {
      body: { name: 'immut-infra', resource_type: 'bucket', provider: 'aws', region: 'us-east-1' },
    });
    const error = expectError(
      await svc.call(t, 'PATCH', `${p}/infrastructure/${r.id}`, {
        body: { provider: 'gcp', region: 'europe-west1', resource_type: 'bucket' },
      }),
      422,
      'unprocessable_entity',
    );
    expect(error.details!.map((x) => x.field).sort()).toEqual(['provider', 'region']);
  });

  it('rejects a change of a user email', async () => {
    const u = await svc.ok(t, 'POST', '/users', { body: { email: 'fixed@example.com', role: 'read-only' } });
    expectError(await svc.call(t, 'PATCH', `/users/${u.id}`, { body: { email: 'moved@example.com' } }), 422, 'unprocessable_entity');
    // The same address in another case is the same value.
    await svc.ok(t, 'PATCH', `/users/${u.id}`, { body: { email: 'FIXED@example.com', name: 'Fix' } });
  });
});

describe('references', () => {
  it('rejects a pipeline step whose connector does not exist, naming the field', async () => {
    const res = await svc.call(t, 'POST', `${p}/pipelines`, {
      body: { name: 'bad-ref', steps: [step('ok'), { name: 'bad', type: 'connector_sync', connector_id: 'con_missing' }] },
    });
    const error = expectError(res, 422, 'unprocessable_entity');
    expect(error.details).toEqual([{ field: 'steps[1].connector_id', message: expect.stringContaining('con_missing') }]);
  });

  it('rejects a masking policy whose classification does not exist', async () => {
    const error = expectError(
      await svc.call(t, 'POST', `${p}/masking-policies`, { body: { name: 'bad-ref', classification_id: 'cls_missing', method: 'redact' } }),
      422,
      'unprocessable_entity',
    );
    expect(error.details!.map((x) => x.field)).toEqual(['classification_id']);
  });

  it('rejects an alert rule with a missing channel, naming the array item', async () => {
    const body = { ...EXAMPLES.alert_rule(deps, 'bad-ref').create, channel_ids: [deps.channelId, 'chn_missing'] };
    const error = expectError(await svc.call(t, 'POST', `${p}/alert-rules`, { body }), 422, 'unprocessable_entity');
    expect(error.details!.map((x) => x.field)).toEqual(['channel_ids[1]']);
  });

  it('rejects a reference to a resource of another project, and on PATCH', async () => {
    const other = await svc.project(t, 'semantics-refs');
    const foreign = await svc.ok(t, 'POST', `/projects/${other.id}/classifications`, { body: { name: 'foreign', sensitivity: 'public' } });
    expectError(
      await svc.call(t, 'POST', `${p}/masking-policies`, {
        body: { name: 'foreign-ref', classification_id: foreign.id, method: 'redact' },
      }),
      422,
      'unprocessable_entity',
    );
    const policy = await svc.ok(t, 'POST', `${p}/masking-policies`, {
      body: { name: 'patch-ref', classification_id: deps.classificationId, method: 'redact' },
    });
    const error = expectError(
      await svc.call(t, 'PATCH', `${p}/masking-policies/${policy.id}`, { body: { classification_id: 'cls_gone' } }),
      422,
      'unprocessable_entity',
    );
    expect(error.details!.map((x) => x.field)).toEqual(['classification_id']);
    expect((await svc.ok(t, 'GET', `${p}/masking-policies/${policy.id}`)).classification_id).toBe(deps.classificationId);
  });

  it('refuses to delete a connector a pipeline uses (409) until the pipeline is gone', async () => {
    const c = await svc.ok(t, 'POST', `${p}/connectors`, { body: connectorBody('in-use') });
    const pl = await svc.ok(t, 'POST', `${p}/pipelines`, {
      body: { name: 'uses-it', steps: [{ name: 's', type: 'connector_sync', connector_id: c.id }] },
    });
    const error = expectError(await svc.call(t, 'DELETE', `${p}/connectors/${c.id}`), 409, 'conflict');
    expect(error.message).toContain('uses-it');
    await svc.ok(t, 'GET', `${p}/connectors/${c.id}`);
    await svc.ok(t, 'DELETE', `${p}/pipelines/${pl.id}`);
    await svc.ok(t, 'DELETE', `${p}/connectors/${c.id}`);
  });

  it('refuses to delete a channel an alert rule or escalation policy uses, and a classification a masking policy uses', async () => {
    const ch = await svc.ok(t, 'POST', `${p}/notification-channels`, {
      body: { name: 'used-chan', type: 'email', config: { email_addresses: ['a@example.com'] } },
    });
    const esc = await svc.ok(t, 'POST', `${p}/escalation-policies`, {
      body: { name: 'uses-chan', steps: [{ delay_minutes: 1, channel_ids: [ch.id] }] },
    });
    expectError(await svc.call(t, 'DELETE', `${p}/notification-channels/${ch.id}`), 409, 'conflict');
    await svc.ok(t, 'DELETE', `${p}/escalation-policies/${esc.id}`);
    await svc.ok(t, 'DELETE', `${p}/notification-channels/${ch.id}`);
    const cls = await svc.ok(t, 'POST', `${p}/classifications`, { body: { name: 'used-cls', sensitivity: 'public' } });
    await svc.ok(t, 'POST', `${p}/masking-policies`, { body: { name: 'uses-cls', classification_id: cls.id, method: 'nullify' } });
    expectError(await svc.call(t, 'DELETE', `${p}/classifications/${cls.id}`), 409, 'conflict');
  });
});

describe('pipeline DAG', () => {
  it('rejects a dependency cycle with 422 naming the step', async () => {
    const res = await svc.call(t, 'POST', `${p}/pipelines`, {
      body: { name: 'cyclic', steps: [step('extract'), step('load', ['transform']), step('transform', ['load'])] },
    });
    const error = expectError(res, 422, 'unprocessable_entity');
    expect(error.message).toMatch(/cycle/);
    expect(error.message).toMatch(/"load"|"transform"/);
    expect(error.details).toHaveLength(1);
    expect(error.details![0].field).toMatch(/^steps\[(1|2)\]\.depends_on$/);
  });

  it('rejects a step depending on itself', async () => {
    const error = expectError(
      await svc.call(t, 'POST', `${p}/pipelines`, { body: { name: 'self', steps: [step('a', ['a'])] } }),
      422,
      'unprocessable_entity',
    );
    expect(error.details).toEqual([{ field: 'steps[0].depends_on', message: expect.stringContaining('"a"') }]);
  });

  it('rejects depends_on a missing step with 422 naming the step and the dependency', async () => {
    const error = expectError(
      await svc.call(t, 'POST', `${p}/pipelines`, { body: { name: 'dangling', steps: [step('a'), step('b', ['a', 'ghost'])] } }),
      422,
      'unprocessable_entity',
    );
    expect(error.details).toEqual([{ field: 'steps[1].depends_on', message: expect.stringMatching(/"b".*"ghost"/) }]);
  });

  it('rejects duplicate step names', async () => {
    const error = expectError(
      await svc.call(t, 'POST', `${p}/pipelines`, { body: { name: 'twice', steps: [step('a'), step('a')] } }),
      422,
      'unprocessable_entity',
    );
    expect(error.details![0].field).toBe('steps[1].name');
  });

  it('checks the DAG on PATCH too and keeps the stored pipeline', async () => {
    const pl = await svc.ok(t, 'POST', `${p}/pipelines`, { body: { name: 'dag-patch', steps: [step('a'), step('b', ['a'])] } });
    expectError(
      await svc.call(t, 'PATCH', `${p}/pipelines/${pl.id}`, { body: { steps: [step('a', ['b']), step('b', ['a'])] } }),
      422,
      'unprocessable_entity',
    );
    expect(await svc.ok(t, 'GET', `${p}/pipelines/${pl.id}`)).toEqual(pl);
  });
});

describe('deleting a project', () => {
  it('removes the project and everything in it, and leaves other projects alone', async () => {
    const doomed = await svc.project(t, 'doomed');
    const keep = await svc.project(t, 'kept');
    const d = await createDeps(svc, t, doomed.id, 'doomed');
    const pl = await svc.ok(t, 'POST', `/projects/${doomed.id}/pipelines`, { body: EXAMPLES.pipeline(d, 'doomed').create });
    const key = await svc.apiKey(t, doomed.id, 'read-only');
    const kept = await svc.ok(t, 'POST', `/projects/${keep.id}/connectors`, { body: connectorBody('survivor') });

    await svc.ok(t, 'DELETE', `/projects/${doomed.id}`);

    expectError(await svc.call(t, 'GET', `/projects/${doomed.id}`), 404, 'resource_not_found');
    expectError(await svc.call(t, 'GET', `/projects/${doomed.id}/connectors`), 404, 'resource_not_found');
    expectError(await svc.call(t, 'GET', `/projects/${doomed.id}/pipelines/${pl.id}`), 404, 'resource_not_found');
    const rows = await svc.service.ctx.db.all('SELECT id FROM resources WHERE project_id = ?', [doomed.id]);
    expect(rows).toEqual([]);
    // The project's API keys stop working.
    expectError(await svc.call(t, 'GET', `/projects/${doomed.id}/connectors`, { token: key.key }), 401, 'unauthorized');
    // Another project is untouched.
    expect(await svc.ok(t, 'GET', `/projects/${keep.id}/connectors/${kept.id}`)).toEqual(kept);
    const projects = await svc.ok(t, 'GET', '/projects');
    expect(projects.data.map((x: { id: string }) => x.id)).not.toContain(doomed.id);
    // The name is free again.
    await svc.project(t, 'doomed');
  });
});

describe('integrity under concurrent writes', () => {
  it('never leaves a pipeline pointing at a connector deleted at the same moment', async () => {
    const project = await svc.project(t, 'race-refs');
    const base = `/projects/${project.id}`;
    for (let i = 0; i < 15; i++) {
      const c = await svc.ok(t, 'POST', `${base}/connectors`, { body: connectorBody(`c${i}`) });
      const [del, created] = await Promise.all([
        svc.call(t, 'DELETE', `${base}/connectors/${c.id}`),
        svc.call(t, 'POST', `${base}/pipelines`, {
          body: { name: `p${i}`, steps: [{ name: 's', type: 'connector_sync', connector_id: c.id }] },
        }),
      ]);
      // Exactly one of them wins; the loser gets 409 (still used) or 422 (missing reference).
      expect([del.status, created.status].sort(), `${del.text} ${created.text}`).toSatisfy(
        (s: number[]) => (s[0] === 201 && s[1] === 409) || (s[0] === 204 && s[1] === 422),
      );
    }
  });

  it('keeps both of two concurrent PATCHes of different fields', async () => {
    const project = await svc.project(t, 'race-patch');
    const base = `/projects/${project.id}/connectors`;
    for (let i = 0; i < 10; i++) {
      const c = await svc.ok(t, 'POST', base, { body: connectorBody(`c${i}`, { credentials: { username: 'u', password: 'pw-before' } }) });
      await Promise.all([
        svc.ok(t, 'PATCH', `${base}/${c.id}`, { body: { labels: { round: String(i) } } }, 200),
        svc.ok(t, 'PATCH', `${base}/${c.id}`, { body: { selected_tables: ['orders'] } }, 200),
        svc.ok(t, 'PATCH', `${base}/${c.id}`, { body: { credentials: { username: 'u2', password: 'pw-after' } } }, 200),
      ]);
      const final = await svc.ok(t, 'GET', `${base}/${c.id}`);
      expect(final).toMatchObject({ labels: { round: String(i) }, selected_tables: ['orders'], credentials: { username: 'u2' } });
      const row = await svc.service.ctx.db.get<{ secrets: string; tenant_id: string }>(
        'SELECT secrets, tenant_id FROM resources WHERE id = ?',
        [c.id],
      );
      expect(svc.service.ctx.resources.cipher.open(row!.secrets, row!.tenant_id, c.id)).toEqual({ credentials: { password: 'pw-after' } });
    }
  });

  it('never leaves resources behind in a project deleted while they are being created', async () => {
    for (let i = 0; i < 5; i++) {
      const doomed = await svc.project(t, `race-doomed-${i}`);
      const results = await Promise.all([
        ...Array.from({ length: 4 }, (_, j) => svc.call(t, 'POST', `/projects/${doomed.id}/connectors`, { body: connectorBody(`c${j}`) })),
        svc.call(t, 'DELETE', `/projects/${doomed.id}`),
      ]);
      expect(results[4].status, results[4].text).toBe(204);
      for (const r of results.slice(0, 4)) expect([201, 404], r.text).toContain(r.status);
      expect(await svc.service.ctx.db.all('SELECT id FROM resources WHERE project_id = ?', [doomed.id])).toEqual([]);
    }
  });
});

describe('URLs', () => {
  it('serves a collection with a trailing slash as the collection, not as a resource with an empty name', async () => {
    await svc.ok(t, 'POST', `${p}/connectors`, { body: connectorBody('slash') });
    const bare = await svc.ok(t, 'GET', `${p}/connectors`);
    const slashed = await svc.ok(t, 'GET', `${p}/connectors/`);
    expect(slashed.data.map((c: { name: string }) => c.name)).toEqual(bare.data.map((c: { name: string }) => c.name));
    expect(slashed.data.map((c: { name: string }) => c.name)).toContain('slash');
    const created = await svc.call(t, 'POST', `${p}/connectors/`, { body: connectorBody('slash-post') });
    expect(created.status, created.text).toBe(201);
  });
});
