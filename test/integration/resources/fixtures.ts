import { expect } from 'vitest';
import type { KindDescriptor } from '../../../src/kinds/index.js';
import type { HttpResponse } from '../../support/http.js';
import type { TestService, TestTenant } from '../../support/service.js';

/** Resources other kinds reference, created once per project. */
export interface Deps {
  projectId: string;
  connectorId: string;
  channelId: string;
  classificationId: string;
  dbtProjectId: string;
  escalationPolicyId: string;
}

/** Secret values the fixtures write; none of them may ever come back from the service. */
export const SECRETS = {
  connectorPassword: 'pw-Conn-7d1f3c9a',
  signingSecret: 'sig-Secret-4b2e8f61',
  slackWebhook: 'https://hooks.slack.test/services/T000/B000/XyZ-slack-9e3a',
  userPassword: 'user-Pass-2c7b5d90',
  ssoClientSecret: 'sso-Client-Secret-5a1e9c37',
};

export interface Example {
  /** A valid create body. */
  create: Record<string, unknown>;
  /** A valid PATCH body (undefined for kinds without update) and what the answer must then contain. */
  patch?: Record<string, unknown>;
  expectAfterPatch?: Record<string, unknown>;
}

/** One valid example per writable kind; `n` makes names unique. */
export const EXAMPLES: Record<string, (deps: Deps, n: string) => Example> = {
  project: (_d, n) => ({
    create: { name: `project-${n}`, description: 'analytics', labels: { team: 'data' } },
    patch: { description: 'renamed analytics' },
    expectAfterPatch: { name: `project-${n}`, description: 'renamed analytics', labels: { team: 'data' } },
  }),
  connector: (_d, n) => ({
    create: {
      name: `orders-${n}`,
      connector_type: 'postgresql',
      config: { host: 'db.internal', port: 5432, database: 'shop', schema: 'public', ssl_mode: 'require' },
      credentials: { username: 'replicator', password: SECRETS.connectorPassword },
      selected_tables: ['public.orders', 'public.customers'],
      schedule: '0 * * * *',
      labels: { owner: 'data' },
    },
    patch: { selected_tables: ['public.orders'], schedule: '*/15 * * * *' },
    expectAfterPatch: {
      selected_tables: ['public.orders'],
      schedule: '*/15 * * * *',
      connector_type: 'postgresql',
      credentials: { username: 'replicator' },
    },
  }),
  infrastructure_resource: (_d, n) => ({
    create: { name: `warehouse-${n}`, resource_type: 'warehouse', provider: 'snowflake', region: 'eu-west-1', config: { size: 'XSMALL' } },
    patch: { config: { size: 'SMALL' } },
    expectAfterPatch: { config: { size: 'SMALL' }, resource_type: 'warehouse', region: 'eu-west-1' },
  }),
  dbt_project: (d, n) => ({
    create: {
      name: `analytics-${n}`,
      repository: 'https://git.example.com/analytics.git',
      models: [
        { name: 'stg_orders', materialization: 'view', sources: [{ connector_id: d.connectorId, table: 'public.orders' }] },
        { name: 'fct_orders', materialization: 'table', depends_on: ['stg_orders'] },
      ],
    },
    patch: { branch: 'develop' },
    expectAfterPatch: { branch: 'develop', target: 'prod' },
  }),
  pipeline: (d, n) => ({
    create: {
      name: `nightly-${n}`,
      schedule: '0 2 * * *',
      steps: [
        { name: 'sync', type: 'connector_sync', connector_id: d.connectorId },
        { name: 'transform', type: 'dbt_run', dbt_project_id: d.dbtProjectId, depends_on: ['sync'] },
        { name: 'notify', type: 'notification', channel_id: d.channelId, depends_on: ['transform'] },
      ],
    },
    patch: { enabled: false, description: 'paused for maintenance' },
    expectAfterPatch: { enabled: false, description: 'paused for maintenance', schedule: '0 2 * * *' },
  }),
  alert_rule: (d, n) => ({
    create: {
      name: `sync-failed-${n}`,
      severity: 'critical',
      condition: { metric: 'run_failed', operator: 'gte', threshold: 1 },
      target: { connector_id: d.connectorId },
      channel_ids: [d.channelId],
      escalation_policy_id: d.escalationPolicyId,
    },
    patch: { severity: 'warning' },
    expectAfterPatch: { severity: 'warning', channel_ids: [d.channelId] },
  }),
  notification_channel: (_d, n) => ({
    create: {
      name: `hooks-${n}`,
      type: 'webhook',
      config: { url: 'https://hooks.example.com/alerts', signing_secret: SECRETS.signingSecret },
    },
    patch: { enabled: false },
    expectAfterPatch: { enabled: false, type: 'webhook', config: { url: 'https://hooks.example.com/alerts' } },
  }),
  escalation_policy: (d, n) => ({
    create: {
      name: `on-call-${n}`,
      steps: [
        { delay_minutes: 0, channel_ids: [d.channelId] },
        { delay_minutes: 30, channel_ids: [d.channelId] },
      ],
    },
    patch: { repeat: 2 },
    expectAfterPatch: { repeat: 2 },
  }),
  classification: (_d, n) => ({
    create: {
      name: `pii-${n}`,
      sensitivity: 'restricted',
      column_matchers: [{ column_pattern: '^email$' }, { column_pattern: 'phone', table_pattern: '^customers$' }],
    },
    patch: { sensitivity: 'confidential' },
    expectAfterPatch: { sensitivity: 'confidential' },
  }),
  masking_policy: (d, n) => ({
    create: {
      name: `mask-${n}`,
      classification_id: d.classificationId,
      method: 'partial',
      partial_visible_chars: 2,
      exempt_roles: ['admin'],
    },
    patch: { method: 'hash' },
    expectAfterPatch: { method: 'hash', classification_id: d.classificationId },
  }),
  user: (_d, n) => ({
    create: { email: `analyst-${n}@example.com`, name: 'Ann Analyst', role: 'read-write', password: SECRETS.userPassword },
    patch: { name: 'Ann B. Analyst', role: 'read-only' },
    expectAfterPatch: { email: `analyst-${n}@example.com`, name: 'Ann B. Analyst', role: 'read-only', status: 'active' },
  }),
  api_key: (_d, n) => ({
    create: { name: `ci-${n}`, permission_level: 'read-write' },
  }),
  sso_provider: (_d, n) => ({
    create: {
      name: `okta-${n}`,
      protocol: 'oidc',
      issuer: 'https://example.okta.com',
      client_id: 'dataplatform',
      client_secret: SECRETS.ssoClientSecret,
      auto_provision: true,
    },
    patch: { default_role: 'read-write', scopes: ['openid', 'email'] },
    expectAfterPatch: {
      protocol: 'oidc',
      issuer: 'https://example.okta.com',
      default_role: 'read-write',
      scopes: ['openid', 'email'],
      auto_provision: true,
      enabled: true,
    },
  }),
};

/** Collection path of a kind: tenant-level or under the project. */
export function collectionPath(d: KindDescriptor, projectId: string): string {
  return d.scope === 'project' ? `/projects/${projectId}/${d.collection}` : `/${d.collection}`;
}

/** Creates the resources other examples reference. */
export async function createDeps(svc: TestService, t: TestTenant, projectId: string, n = 'dep'): Promise<Deps> {
  const base = `/projects/${projectId}`;
  const connector = await svc.ok(t, 'POST', `${base}/connectors`, {
    body: { name: `dep-conn-${n}`, connector_type: 'mysql', credentials: { username: 'u', password: 'dep-password' } },
  });
  const channel = await svc.ok(t, 'POST', `${base}/notification-channels`, {
    body: { name: `dep-chan-${n}`, type: 'email', config: { email_addresses: ['ops@example.com'] } },
  });
  const classification = await svc.ok(t, 'POST', `${base}/classifications`, { body: { name: `dep-cls-${n}`, sensitivity: 'internal' } });
  const dbt = await svc.ok(t, 'POST', `${base}/dbt-projects`, {
    body: { name: `dep-dbt-${n}`, repository: 'https://git.example.com/dep.git' },
  });
  const escalation = await svc.ok(t, 'POST', `${base}/escalation-policies`, {
    body: { name: `dep-esc-${n}`, steps: [{ delay_minutes: 5, channel_ids: [channel.id] }] },
  });
  return {
    projectId,
    connectorId: connector.id,
    channelId: channel.id,
    classificationId: classification.id,
    dbtProjectId: dbt.id,
    escalationPolicyId: escalation.id,
  };
}

/** A minimal connector body. */
export const connectorBody = (name: string, extra: Record<string, unknown> = {}) => ({ name, connector_type: 'postgresql', ...extra });

/** Asserts the spec's error envelope and returns the error. */
export function expectError(res: HttpResponse, status: number, code: string) {
  if (res.status !== status) throw new Error(`expected ${status} ${code}, got ${res.status}: ${res.text}`);
  expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
  expect(res.body).toBeTypeOf('object');
  expect(res.body.error).toMatchObject({ code, message: expect.any(String) });
  expect(res.body.error.message.length).toBeGreaterThan(0);
  expectNoStackTrace(res.text);
  return res.body.error as { code: string; message: string; details?: { field: string; message: string }[] };
}

/** No stack frames, source paths or internal error names in a body. */
export function expectNoStackTrace(text: string) {
  expect(text).not.toMatch(/\n\s+at\s/);
  expect(text).not.toMatch(/\bat [^\s]+ \(/);
  expect(text).not.toMatch(/\.(ts|js):\d+/);
  expect(text).not.toMatch(/node_modules|\/src\/|stack/i);
}

/** Asserts a validation_error whose details name exactly these fields (one detail per field). */
export function expectValidation(res: HttpResponse, fields: string[]) {
  const error = expectError(res, 400, 'validation_error');
  expect(Array.isArray(error.details), `details in ${res.text}`).toBe(true);
  for (const detail of error.details!) expect(detail).toEqual({ field: expect.any(String), message: expect.any(String) });
  expect(error.details!.map((x) => x.field).sort(), res.text).toEqual([...fields].sort());
  return error;
}
