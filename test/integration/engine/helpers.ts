import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataPlatformClient } from '../../../src/client/index.js';
import type { TestService, TestTenant } from '../../support/service.js';

export const EXAMPLE = join(import.meta.dirname, '..', '..', '..', 'examples', 'platform');

/** The env values examples/platform's secretRefs need. */
export const SECRET_ENV: Record<string, string> = {
  OPS_BOT_PASSWORD: 'ops-bot-password-1',
  ANALYTICS_SLACK_WEBHOOK_URL: 'https://hooks.slack.example/T000/B000/xyz',
  ONCALL_SIGNING_SECRET: 'signing-secret-1',
  ORDERS_DB_PASSWORD: 'orders-pw-1',
  BILLING_DB_PASSWORD: 'billing-pw-1',
  SALESFORCE_PASSWORD: 'sf-pw-1',
};

export function clientFor(svc: TestService, t: TestTenant): DataPlatformClient {
  return new DataPlatformClient({
    url: `https://${t.slug}.localhost:${svc.port}`,
    email: t.adminEmail,
    password: t.adminPassword,
    caFile: svc.service.tls.certPath,
  });
}

/** A copy of examples/platform in a temp dir named `name` (the default source id). */
export function copyExample(name = 'platform'): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'dp-engine-')), name);
  cpSync(EXAMPLE, dir, { recursive: true });
  return dir;
}

/** Replaces text in a file of a config copy, insisting that it was there. */
export function edit(dir: string, file: string, from: string | RegExp, to: string): void {
  const path = join(dir, file);
  const text = readFileSync(path, 'utf8');
  const next = text.replace(from, to);
  if (next === text) throw new Error(`edit: ${String(from)} not found in ${file}`);
  writeFileSync(path, next);
}

/** Environment for running `dpctl` against a test tenant as its admin (API keys cannot create projects or users). */
export const cliEnvFor = (svc: TestService, t: TestTenant): Record<string, string> => ({
  ...SECRET_ENV,
  DATAPLATFORM_URL: `https://${t.slug}.localhost:${svc.port}`,
  DATAPLATFORM_EMAIL: t.adminEmail,
  DATAPLATFORM_PASSWORD: t.adminPassword,
  DATAPLATFORM_CA_FILE: svc.service.tls.certPath,
  DATAPLATFORM_API_KEY: '',
});
