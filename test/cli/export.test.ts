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
  ANALYTICS_DATA_TEAM_SLACK_SLACK_WEBHOOK_URL: SECRET_ENV.ANALYTICS_SLACK_WEBHOOK_URL,
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
