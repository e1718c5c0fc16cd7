import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runDpctl } from '../support/cli.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { BYSTANDER_MAX_MS, whileServingOther } from './support.js';

/**
 * Least privilege for API keys (issue 17): a key of project A reads project A (its object and
 * what is in it) and nothing else of the tenant: not its users (emails, roles), not the tenant
 * audit log, not SSO providers, not project B (which is "not found", exactly like a project
 * that does not exist, so its existence is not revealed). `dpctl plan` with a key still works.
 */
let svc: TestService;
let t: TestTenant;
let bystander: TestTenant;
let projectA: { id: string; name: string };
let projectB: { id: string; name: string };
let channelB: { id: string };
const keys: Record<'read-only' | 'read-write', string> = { 'read-only': '', 'read-write': '' };
const tmp = mkdtempSync(join(tmpdir(), 'dp-privilege-'));

const channel = (name: string) => ({ name, type: 'email', config: { email_addresses: ['team@example.com'] } });

beforeAll(async () => {
  svc = await startTestService();
  [t, bystander] = await Promise.all([svc.tenant(), svc.tenant()]);
  projectA = await svc.project(t, 'tf-a');
  projectB = await svc.project(t, 'tf-b');
  channelB = await svc.ok(t, 'POST', `/projects/${projectB.id}/notification-channels`, { body: channel('b-alerts') });
  await svc.ok(t, 'POST', `/projects/${projectA.id}/notification-channels`, { body: channel('a-alerts') });
  keys['read-only'] = (await svc.apiKey(t, projectA.id, 'read-only')).key;
  keys['read-write'] = (await svc.apiKey(t, projectA.id, 'read-write')).key;
});
afterAll(async () => {
  await svc?.close();
  rmSync(tmp, { recursive: true, force: true });
});

const expectError = (res: { status: number; body: any }, status: number, code: string) => {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body.error.code).toBe(code);
};

describe.each(['read-only', 'read-write'] as const)('a %s API key of project A', (level) => {
  test('reads project A only; users, the tenant audit log, SSO providers and project B are not its to see', async () => {
    const token = keys[level];
    const adminId = (await svc.ok(t, 'GET', '/users')).data[0].id as string;
    const { probe } = await whileServingOther(svc, bystander, async () => {
      // The tenant's people: forbidden, listing or by id, reading or writing.
      const users = await svc.call(t, 'GET', '/users', { token });
      expectError(users, 403, 'forbidden');
      expect(users.body.error.message).toBe('API keys are limited to their project; reading users needs a user token');
      expectError(await svc.call(t, 'GET', `/users/${adminId}`, { token }), 403, 'forbidden');
      expectError(await svc.call(t, 'GET', '/sso-providers', { token }), 403, 'forbidden');
      expectError(await svc.call(t, 'GET', '/audit-logs', { token }), 403, 'forbidden');

      // Its own project: listed alone, readable, with its resources and its audit log.
      const projects = await svc.call(t, 'GET', '/projects', { token });
      expect(projects.status).toBe(200);
      expect(projects.body.data.map((p: { id: string }) => p.id)).toEqual([projectA.id]);
      expect((await svc.call(t, 'GET', `/projects/${projectA.id}`, { token })).status).toBe(200);
      const own = await svc.call(t, 'GET', `/projects/${projectA.id}/notification-channels`, { token });
      expect(own.body.data.map((c: { name: string }) => c.name)).toEqual(['a-alerts']);
      expect((await svc.call(t, 'GET', `/projects/${projectA.id}/audit-logs`, { token })).status).toBe(200);

      // Project B answers exactly as a project that does not exist.
      const missing = 'prj_doesnotexist000000';
      for (const [path, ghost] of [
        [`/projects/${projectB.id}`, `/projects/${missing}`],
        [`/projects/${projectB.id}/notification-channels`, `/projects/${missing}/notification-channels`],
        [`/projects/${projectB.id}/notification-channels/${channelB.id}`, `/projects/${missing}/notification-channels/${channelB.id}`],
        [`/projects/${projectB.id}/audit-logs`, `/projects/${missing}/audit-logs`],
      ]) {
        const [real, none] = await Promise.all([svc.call(t, 'GET', path, { token }), svc.call(t, 'GET', ghost, { token })]);
        expectError(real, 404, 'resource_not_found');
        expect(real.body).toEqual(none.body);
      }
      if (level === 'read-write') {
        expectError(
          await svc.call(t, 'PATCH', `/projects/${projectB.id}/notification-channels/${channelB.id}`, { token, body: { name: 'taken' } }),
          404,
          'resource_not_found',
        );
        expectError(
          await svc.call(t, 'POST', `/projects/${projectB.id}/notification-channels`, { token, body: channel('planted') }),
          404,
          'resource_not_found',
        );
        expectError(
          await svc.call(t, 'POST', '/users', {
            token,
            body: { email: `k@${t.slug}.test`, role: 'admin', password: 'escalated-password' },
          }),
          403,
          'forbidden',
        );
      }
    });
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
    // Nothing of B changed, and a user token still sees the whole tenant.
    expect((await svc.ok(t, 'GET', `/projects/${projectB.id}/notification-channels/${channelB.id}`)).name).toBe('b-alerts');
    expect((await svc.ok(t, 'GET', '/projects')).data).toHaveLength(2);
  });
});

test('dpctl plan with a read-write key of project A still finds its project (one spawned CLI)', async () => {
  const dir = join(tmp, 'keyed');
  mkdirSync(dir);
  writeFileSync(
    join(dir, 'resources.yaml'),
    `apiVersion: dataplatform/v1
kind: NotificationChannel
metadata:
  name: ops-email
  project: ${projectA.name}
spec:
  type: email
  config:
    email_addresses: [ops@example.com]
`,
  );
  const env = {
    DATAPLATFORM_URL: `https://${t.slug}.localhost:${svc.port}`,
    DATAPLATFORM_API_KEY: keys['read-write'],
    DATAPLATFORM_CA_FILE: svc.service.tls.certPath,
    DATAPLATFORM_EMAIL: '',
    DATAPLATFORM_PASSWORD: '',
    DATAPLATFORM_INSECURE: '',
  };
  const plan = await runDpctl(['plan', dir, '--allow-undeclared-projects'], { env });
  expect(plan.stderr).toBe('');
  expect(plan.code).toBe(2);
  expect(plan.stdout).toContain(`  + NotificationChannel ${projectA.name}/ops-email: create`);
  expect(plan.stdout).toMatch(/Plan: 1 to create, 0 to update, 0 to replace, 0 to delete, 0 unchanged\.\n$/);
}, 60_000);
