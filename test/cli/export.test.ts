import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { runDpctl } from '../support/cli.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { copyExample, SECRET_ENV, cliEnvFor } from '../integration/engine/helpers.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => {
  await svc?.close();
});

const envFor = (t: TestTenant) => cliEnvFor(svc, t);

/** The exported variables, set to the example's values. */
const EXPORTED_ENV = {
  ANALYTICS_ORDERS_DB_PASSWORD: SECRET_ENV.ORDERS_DB_PASSWORD,
  ANALYTICS_BILLING_DB_PASSWORD: SECRET_ENV.BILLING_DB_PASSWORD,
  ANALYTICS_DATA_TEAM_SLACK_WEBHOOK_URL: SECRET_ENV.ANALYTICS_SLACK_WEBHOOK_URL,
  ANALYTICS_ONCALL_WEBHOOK_SIGNING_SECRET: SECRET_ENV.ONCALL_SIGNING_SECRET,
  MARKETING_CRM_PASSWORD: SECRET_ENV.SALESFORCE_PASSWORD,
};

test('dpctl export --out, validate, plan of the export (exit 0), adopt (exit 0 / 2), export to stdout', async () => {
  const t = await svc.tenant();
  const env = envFor(t);
  expect((await runDpctl(['apply', copyExample()], { env })).code).toBe(0);
  const out = join(mkdtempSync(join(tmpdir(), 'dp-cli-export-')), 'platform');
  const exported = await runDpctl(['export', '--all-projects', '--users', '--out', out], { env });
  expect(exported.code).toBe(0);
  expect(exported.stderr).toMatch(/^exported 26 documents to \d+ files under .*; set 5 secret variables/);
  expect(readFileSync(join(out, 'analytics', 'connectors.yaml'), 'utf8')).toContain('env: ANALYTICS_ORDERS_DB_PASSWORD');
  const validate = await runDpctl(['validate', out], { env });
  expect(validate.code).toBe(0);
  const plan = await runDpctl(['plan', out, '--prune'], { env: { ...env, ...EXPORTED_ENV } });
  expect(plan.stdout).toContain('No changes: 26 resources in sync.');
  expect(plan.code).toBe(0);
  const adopt = await runDpctl(['adopt', out], { env: { ...env, ...EXPORTED_ENV } });
  expect(adopt.code).toBe(0);
  expect(adopt.stdout).toMatch(/^owned\s+Connector\s+analytics\s+orders-db\s+already managed by this source$/m);

  // A mismatch: exit 2, nothing labelled.
  const file = join(out, 'marketing', 'connectors.yaml');
  writeFileSync(file, readFileSync(file, 'utf8').replace('schedule: 15 */4 * * *', 'schedule: 0 1 * * *'));
  const differs = await runDpctl(['adopt', out, '--source-id', 'platform'], { env: { ...env, ...EXPORTED_ENV } });
  expect(differs.code).toBe(2);
  expect(differs.stdout).toMatch(/^differs\s+Connector\s+marketing\s+crm\s+schedule: not adopted$/m);

  const stdout = await runDpctl(['export', '--project', 'marketing'], { env });
  expect(stdout.code).toBe(0);
  expect(stdout.stdout).toMatch(/^# Exported by dpctl export/);
  expect(stdout.stdout).toContain('kind: Project\nmetadata:\n  name: marketing');
  expect(stdout.stdout).not.toContain('analytics');
  const missing = await runDpctl(['export'], { env });
  expect(missing.code).toBe(1);
  expect(missing.stderr).toContain('--project <name>');
}, 60_000);

test('drift of an exported baseline of resources written outside dpctl (as Terraform leaves them): secrets without a fingerprint are not drift, other fields are', async () => {
  const t = await svc.tenant();
  const env = envFor(t);
  const project = await svc.project(t, 'tf-made');
  // What the Terraform provider writes: no dpctl labels, so no secrets fingerprint.
  const connector = await svc.ok(t, 'POST', `/projects/${project.id}/connectors`, {
    body: {
      name: 'orders-db',
      connector_type: 'postgresql',
      config: { host: 'db.internal', port: 5432 },
      credentials: { username: 'u', password: 'right-pw' },
    },
  });
  const out = join(mkdtempSync(join(tmpdir(), 'dp-cli-baseline-')), 'drift-baseline');
  expect((await runDpctl(['export', '--project', 'tf-made', '--out', out], { env })).code).toBe(0);
  const secrets = { ...env, TF_MADE_ORDERS_DB_PASSWORD: 'right-pw' };
  // It said "changed ... credentials.password" and exited 2 every night.
  const clean = await runDpctl(['drift', out], { env: secrets });
  expect(clean.code, clean.stdout + clean.stderr).toBe(0);
  expect(clean.stdout).toContain('No drift: the platform matches the config.');
  expect(clean.stdout).toContain('note: secrets not compared for 1 resource (Connector tf-made/orders-db): it carries no fingerprint');
  const json = JSON.parse((await runDpctl(['drift', out, '--output', 'json'], { env: secrets })).stdout);
  expect(json.secrets_not_compared).toEqual(['Connector tf-made/orders-db']);
  expect(json.drift).toEqual([]);
  // A field changed by hand is still drift, and only that field is reported.
  await svc.ok(t, 'PATCH', `/projects/${project.id}/connectors/${connector.id}`, {
    body: { config: { host: 'other.internal', port: 5432 } },
  });
  const drifted = await runDpctl(['drift', out], { env: secrets });
  expect(drifted.code).toBe(2);
  expect(drifted.stdout).toMatch(/changed\s+Connector\s+tf-made\s+orders-db\s+config\.host/);
  expect(drifted.stdout).not.toContain('credentials.password');
}, 60_000);
