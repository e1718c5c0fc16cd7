import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writableKinds, valuesAt, type KindDescriptor } from '../../../src/kinds/index.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { EXAMPLES, SECRETS, collectionPath, createDeps, expectError, type Deps } from './fixtures.js';

let svc: TestService;
let t: TestTenant;
let deps: Deps;

beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  const project = await svc.project(t, 'crud-home');
  deps = await createDeps(svc, t, project.id);
});
afterAll(() => svc?.close());

const ALL_SECRETS = Object.values(SECRETS);
const expectNoSecrets = (what: unknown) => {
  const text = JSON.stringify(what);
  for (const secret of ALL_SECRETS) expect(text, `secret leaked in ${text}`).not.toContain(secret);
};

/** Every declared secret path is absent from an API view. */
const expectNoSecretPaths = (d: KindDescriptor, body: Record<string, unknown>) => {
  for (const path of d.secretPaths) expect(valuesAt(body, path), `${path.join('.')} in ${JSON.stringify(body)}`).toEqual([]);
};

const rowOf = (id: string) =>
  svc.service.ctx.db.get<{ data: string; secrets: string | null; tenant_id: string }>(
    'SELECT data, secrets, tenant_id FROM resources WHERE id = ?',
    [id],
  );
/** The write-only values of a row as stored: sealed at rest (docs/security.md), opened with the service's key. */
async function storedSecrets(id: string) {
  const row = (await rowOf(id))!;
  expect(row.secrets).toMatch(/^enc:v1:/);
  return svc.service.ctx.resources.cipher.open(row.secrets!, row.tenant_id, id);
}

describe('fixtures cover the model', () => {
  it('has one example for every writable kind and no example for anything else', () => {
    const kinds = writableKinds()
      .map((d) => d.kind)
      .sort();
    expect(kinds).toEqual(
      [
        'alert_rule',
        'api_key',
        'classification',
        'connector',
        'dbt_project',
        'escalation_policy',
        'infrastructure_resource',
        'masking_policy',
        'notification_channel',
        'pipeline',
        'project',
        'sso_provider',
        'user',
      ].sort(),
    );
    expect(Object.keys(EXAMPLES).sort()).toEqual(kinds);
  });
});

describe.each(writableKinds().map((d) => [d.kind, d] as const))('CRUD of %s', (kindName, d) => {
  it('creates (201 with computed fields), gets, lists, patches, deletes (204) and then 404s', async () => {
    const example = EXAMPLES[kindName](deps, `${kindName.replace(/_/g, '-')}-${Date.now().toString(36)}`);
    const base = collectionPath(d, deps.projectId);

    // create
    const createdRes = await svc.call(t, 'POST', base, { body: example.create });
    expect(createdRes.status, createdRes.text).toBe(201);
    expect(String(createdRes.headers['content-type'])).toMatch(/^application\/json/);
    const created = createdRes.body;
    expect(created.id).toMatch(/^[a-z]{3}_[A-Za-z0-9_-]{10,}$/);
    for (const field of d.computedFields) {
      if (d.onceFields.includes(field) && !(kindName === 'api_key' && field === 'key')) continue;
      expect(created, `computed ${field}`).toHaveProperty(field);
    }
    if (d.computedFields.includes('created_at')) {
      expect(new Date(created.created_at).toISOString()).toBe(created.created_at);
      expect(Math.abs(Date.now() - Date.parse(created.created_at))).toBeLessThan(60_000);
    }
    if (d.scope === 'project') expect(created.project_id).toBe(deps.projectId);
    expect(created).toMatchObject(stripSecrets(d, example.create));
    expectNoSecretPaths(d, created);
    expectNoSecrets(created);

    // get
    const got = await svc.ok(t, 'GET', `${base}/${created.id}`);
    const { key: _key, invitation_token: _inv, ...persistent } = created;
    expect(got).toEqual(persistent);
    for (const field of d.onceFields) expect(got).not.toHaveProperty(field);
    expectNoSecrets(got);

    // list
    const list = await svc.ok(t, 'GET', base);
    expect(list.has_more).toBe(false);
    expect(list).not.toHaveProperty('next_cursor');
    const listed = list.data.find((x: { id: string }) => x.id === created.id);
    expect(listed).toEqual(persistent);
    expectNoSecrets(list);

    // patch
    if (d.operations.includes('update')) {
      const patched = await svc.ok(t, 'PATCH', `${base}/${created.id}`, { body: example.patch });
      expect(patched).toMatchObject(example.expectAfterPatch!);
      expect(patched.id).toBe(created.id);
      if (d.computedFields.includes('created_at')) expect(patched.created_at).toBe(created.created_at);
      if (d.computedFields.includes('updated_at'))
        expect(Date.parse(patched.updated_at)).toBeGreaterThanOrEqual(Date.parse(created.updated_at));
      expectNoSecrets(patched);
      const again = await svc.ok(t, 'GET', `${base}/${created.id}`);
      expect(again).toEqual(patched);
    } else {
      const res = await svc.call(t, 'PATCH', `${base}/${created.id}`, { body: { name: 'renamed' } });
      expectError(res, 404, 'resource_not_found');
    }

    // delete
    const del = await svc.call(t, 'DELETE', `${base}/${created.id}`);
    expect(del.status, del.text).toBe(204);
    expect(del.text).toBe('');
    expectError(await svc.call(t, 'GET', `${base}/${created.id}`), 404, 'resource_not_found');
    expectError(await svc.call(t, 'DELETE', `${base}/${created.id}`), 404, 'resource_not_found');
    const after = await svc.ok(t, 'GET', base);
    expect(after.data.map((x: { id: string }) => x.id)).not.toContain(created.id);
  });
});

function stripSecrets(d: KindDescriptor, body: Record<string, unknown>) {
  const copy = structuredClone(body);
  for (const path of d.secretPaths) {
    for (const found of valuesAt(copy, path)) {
      let cur: any = copy;
      for (const p of found.path.slice(0, -1)) cur = cur[p];
      delete cur[found.path[found.path.length - 1]];
    }
  }
  return copy;
}

describe('secrets', () => {
  it('never returns a connector password, and a PATCH of credentials without it keeps the stored one', async () => {
    const base = `/projects/${deps.projectId}/connectors`;
    const created = await svc.ok(t, 'POST', base, {
      body: { name: 'secret-conn', connector_type: 'snowflake', credentials: { username: 'loader', password: SECRETS.connectorPassword } },
    });
    expect(created.credentials).toEqual({ username: 'loader' });
    const row = await rowOf(created.id);
    expect(await storedSecrets(created.id)).toEqual({ credentials: { password: SECRETS.connectorPassword } });
    expect(row!.data).not.toContain(SECRETS.connectorPassword);
    expect(row!.secrets).not.toContain(SECRETS.connectorPassword);

    const patched = await svc.ok(t, 'PATCH', `${base}/${created.id}`, { body: { credentials: { username: 'loader2' } } });
    expect(patched.credentials).toEqual({ username: 'loader2' });
    expect(await storedSecrets(created.id)).toEqual({ credentials: { password: SECRETS.connectorPassword } });

    const changed = await svc.ok(t, 'PATCH', `${base}/${created.id}`, {
      body: { credentials: { username: 'loader2', password: 'brand-new-pw-1' } },
    });
    expect(JSON.stringify(changed)).not.toContain('brand-new-pw-1');
    expect(await storedSecrets(created.id)).toEqual({ credentials: { password: 'brand-new-pw-1' } });

    const unrelated = await svc.ok(t, 'PATCH', `${base}/${created.id}`, { body: { labels: { a: 'b' } } });
    expect(unrelated.credentials).toEqual({ username: 'loader2' });
    expect(await storedSecrets(created.id)).toEqual({ credentials: { password: 'brand-new-pw-1' } });

    for (const res of [await svc.call(t, 'GET', `${base}/${created.id}`), await svc.call(t, 'GET', base)]) {
      expect(res.text).not.toContain('brand-new-pw-1');
      expect(res.text).not.toContain(SECRETS.connectorPassword);
    }
  });

  it('never returns notification channel signing secrets or Slack webhook URLs', async () => {
    const base = `/projects/${deps.projectId}/notification-channels`;
    const slack = await svc.call(t, 'POST', base, {
      body: { name: 'slack-secret', type: 'slack', config: { slack_webhook_url: SECRETS.slackWebhook, slack_channel: '#alerts' } },
    });
    expect(slack.status, slack.text).toBe(201);
    expect(slack.body.config).toEqual({ slack_channel: '#alerts' });
    const hook = await svc.ok(t, 'POST', base, {
      body: { name: 'hook-secret', type: 'webhook', config: { url: 'https://example.com/h', signing_secret: SECRETS.signingSecret } },
    });
    expect(hook.config).toEqual({ url: 'https://example.com/h' });
    expect(await storedSecrets(slack.body.id)).toEqual({ config: { slack_webhook_url: SECRETS.slackWebhook } });
    expect(await storedSecrets(hook.id)).toEqual({ config: { signing_secret: SECRETS.signingSecret } });

    // Changing the channel name on its own keeps the stored Slack URL.
    const renamed = await svc.ok(t, 'PATCH', `${base}/${slack.body.id}`, { body: { config: { slack_channel: '#ops' } } });
    expect(renamed.config).toEqual({ slack_channel: '#ops' });
    expect(await storedSecrets(slack.body.id)).toEqual({ config: { slack_webhook_url: SECRETS.slackWebhook } });

    for (const path of [base, `${base}/${slack.body.id}`, `${base}/${hook.id}`]) {
      const res = await svc.call(t, 'GET', path);
      expect(res.status).toBe(200);
      expect(res.text).not.toContain(SECRETS.slackWebhook);
      expect(res.text).not.toContain(SECRETS.signingSecret);
    }
  });

  it('never returns or stores a user password in the resource row', async () => {
    const created = await svc.ok(t, 'POST', '/users', {
      body: { email: 'Secret.User@Example.com', role: 'read-only', password: SECRETS.userPassword },
    });
    expect(created.email).toBe('secret.user@example.com');
    expect(created).not.toHaveProperty('password');
    expect(created).not.toHaveProperty('invitation_token');
    expect(created.status).toBe('active');
    const row = await rowOf(created.id);
    expect(row!.secrets).toBeNull();
    expect(row!.data).not.toContain(SECRETS.userPassword);
    const patched = await svc.ok(t, 'PATCH', `/users/${created.id}`, { body: { password: 'another-pass-99' } });
    expect(JSON.stringify(patched)).not.toContain('another-pass-99');
    for (const res of [await svc.call(t, 'GET', '/users'), await svc.call(t, 'GET', `/users/${created.id}`)]) {
      expect(res.status).toBe(200);
      expect(res.text).not.toContain(SECRETS.userPassword);
      expect(res.text).not.toContain('another-pass-99');
    }
    // The new password is the one that logs in.
    const login = await svc.call(t, 'POST', '/auth/login', {
      body: { email: 'secret.user@example.com', password: 'another-pass-99' },
      token: '',
    });
    expect(login.status, login.text).toBe(200);
  });

  it('shows an API key value once, at creation', async () => {
    const created = await svc.ok(t, 'POST', `/projects/${deps.projectId}/api-keys`, {
      body: { name: 'once', permission_level: 'read-only' },
    });
    expect(created.key).toMatch(/^dpk_/);
    expect(created.key_prefix).toBe(created.key.slice(0, created.key_prefix.length));
    for (const res of [
      await svc.call(t, 'GET', `/projects/${deps.projectId}/api-keys/${created.id}`),
      await svc.call(t, 'GET', `/projects/${deps.projectId}/api-keys`),
    ]) {
      expect(res.status).toBe(200);
      expect(res.text).not.toContain(created.key);
    }
    const row = await rowOf(created.id);
    expect(row!.data).not.toContain(created.key);
    expect(row!.secrets ?? '').not.toContain(created.key);
  });
});
