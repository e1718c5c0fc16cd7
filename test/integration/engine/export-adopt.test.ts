import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../../../src/config/index.js';
import {
  adoptResources,
  exportResources,
  MANAGED_BY_LABEL,
  preparePlan,
  reconcile,
  SECRETS_SHA_LABEL,
  type EngineOptions,
  type ExportResult,
} from '../../../src/engine/index.js';
import { writeFileSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { startTestService, type TestService } from '../../support/service.js';
import { clientFor, copyExample, EXAMPLE, SECRET_ENV } from './helpers.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => {
  await svc?.close();
});

const active = <T extends { action: string }>(plan: { changes: T[] }): T[] => plan.changes.filter((c) => c.action !== 'no-op');

function writeExport(result: ExportResult, name = 'exported'): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'dp-export-')), name);
  for (const f of result.files) {
    mkdirSync(dirname(join(dir, f.path)), { recursive: true });
    writeFileSync(join(dir, f.path), f.content);
  }
  return dir;
}

/** The exported variables, set to the values the example's own variables hold for the same secret. */
function envForExport(result: ExportResult): Record<string, string> {
  const { config } = loadConfig([EXAMPLE]);
  const env: Record<string, string> = {};
  for (const s of result.secrets) {
    const doc = config.documents.find((d) => d.yamlKind === s.yamlKind && d.project === s.project && d.name === s.name)!;
    const secret = doc.secrets.find((x) => x.field === s.field)!;
    expect(secret, `${s.yamlKind} ${s.name} ${s.field}`).toBeDefined();
    env[s.env] = SECRET_ENV[(secret.ref as { env: string }).env];
  }
  return env;
}

describe('dpctl export', () => {
  test('round trip: apply examples/platform, export, validate, and plan the export: zero changes', async () => {
    const t = await svc.tenant();
    const client = clientFor(svc, t);
    try {
      const applied = await reconcile(client, [copyExample()], { sourceId: 'platform', env: SECRET_ENV });
      expect(applied.result!.converged).toBe(true);
      const result = await exportResources(client, { projects: ['analytics', 'marketing'], tenantKinds: ['user'] });
      expect(result.warnings).toEqual([]);
      const paths = result.files.map((f) => f.path);
      expect(paths).toEqual([...paths].sort());
      expect(paths).toEqual(
        expect.arrayContaining([
          'analytics/project.yaml',
          'analytics/connectors.yaml',
          'analytics/dbt-projects.yaml',
          'analytics/notification-channels.yaml',
          'marketing/project.yaml',
          'marketing/connectors.yaml',
          'users.yaml',
        ]),
      );
      const all = result.files.map((f) => f.content).join('\n');
      expect(all).not.toContain('dpctl.dev/');
      expect(all).not.toMatch(/\b(con|pip|chn|prj)_[0-9a-z]{6,}/); // references by name, no ids
      expect(all).not.toContain('orders-pw-1');
      expect(result.secrets.map((s) => `${s.env} ${s.yamlField}`).sort()).toEqual([
        'ANALYTICS_BILLING_DB_PASSWORD spec.credentials.password',
        'ANALYTICS_DATA_TEAM_SLACK_WEBHOOK_URL spec.config.slack_webhook_url',
        'ANALYTICS_ONCALL_WEBHOOK_SIGNING_SECRET spec.config.signing_secret',
        'ANALYTICS_ORDERS_DB_PASSWORD spec.credentials.password',
        'MARKETING_CRM_PASSWORD spec.credentials.password',
      ]);
      const connectors = result.files.find((f) => f.path === 'analytics/connectors.yaml')!.content;
      expect(connectors).toMatch(/^# Secrets are write-only/m);
      expect(connectors).toMatch(/^# {3}ANALYTICS_ORDERS_DB_PASSWORD +Connector analytics\/orders-db spec\.credentials\.password$/m);
      expect(connectors).toContain('      secretRef:\n        env: ANALYTICS_ORDERS_DB_PASSWORD');
      expect(connectors).not.toContain('status');
      // Deterministic.
      const again = await exportResources(client, { projects: ['marketing', 'analytics'], tenantKinds: ['user'] });
      expect(again.files.map((f) => f.content)).toEqual(result.files.map((f) => f.content));

      const dir = writeExport(result);
      const loaded = loadConfig([dir]);
      expect(loaded.errors).toEqual([]);
      expect(loaded.config.documents.length).toBe(26); // the example's 25, and the tenant's admin user
      const { plan } = await preparePlan(client, [dir], { sourceId: 'platform', env: envForExport(result), prune: true });
      expect(plan.errors).toEqual([]);
      expect(active(plan)).toEqual([]);
      // Without the variables, only the secrets are missing.
      const noEnv = await preparePlan(client, [dir], { sourceId: 'platform', env: {} }).catch((e: Error) => e);
      expect(String(noEnv)).toContain('is not set');
    } finally {
      await client.close();
    }
  });

  test('a file past the size cap is split in parts (connectors.yaml, connectors-2.yaml, ...) that load and plan as the whole', async () => {
    const t = await svc.tenant();
    const client = clientFor(svc, t);
    try {
      expect((await reconcile(client, [copyExample()], { sourceId: 'platform', env: SECRET_ENV })).result!.converged).toBe(true);
      const whole = await exportResources(client, { projects: ['analytics'] });
      const wholeFile = whole.files.find((f) => f.path === 'analytics/connectors.yaml')!;
      // A cap under two connectors' YAML: one connector a part.
      const split = await exportResources(client, { projects: ['analytics'], maxFileBytes: 100 });
      const parts = split.files.filter((f) => f.path.startsWith('analytics/connectors'));
      expect(parts.map((f) => f.path)).toEqual(['analytics/connectors.yaml', 'analytics/connectors-2.yaml']);
      expect(parts.map((f) => f.documents.map((d) => d.name))).toEqual(wholeFile.documents.map((d) => [d.name]));
      // Each part's header names the secrets of its own documents.
      for (const part of parts)
        expect(part.content.match(/^# {3}(\S+)/gm)).toEqual(part.documents.flatMap((d) => d.secrets.map((x) => `#   ${x.env}`)));
      const loaded = loadConfig([writeExport(split)]);
      expect(loaded.errors).toEqual([]);
      expect(loaded.config.documents.map((d) => d.name).sort()).toEqual(
        loadConfig([writeExport(whole)])
          .config.documents.map((d) => d.name)
          .sort(),
      );
      const { plan } = await preparePlan(client, [writeExport(split, 'platform')], { sourceId: 'platform', env: envForExport(split) });
      expect(plan.errors).toEqual([]);
      expect(active(plan)).toEqual([]);
    } finally {
      await client.close();
    }
  });
});

describe('dpctl adopt', () => {
  test('hand-made resources that match are labelled; one that differs is not; then prune deletes an adopted one', async () => {
    const t = await svc.tenant();
    const client = clientFor(svc, t);
    try {
      const project = await client.projects.create({ name: 'legacy', description: 'made by hand' });
      const connectors = client.resources('connector', { projectId: project.id });
      await connectors.create({
        name: 'pg',
        connector_type: 'postgresql',
        config: { host: 'pg.internal', port: 5432 },
        credentials: { username: 'u', password: 'pg-secret-1' },
        labels: { team: 'x' },
      });
      await connectors.create({ name: 'other', connector_type: 'mysql', schedule: '0 * * * *' });
      await connectors.create({ name: 'drifted', connector_type: 'mysql', selected_tables: ['a'] });
      const classifications = client.resources('classification', { projectId: project.id });
      await classifications.create({ name: 'pii', sensitivity: 'confidential' });

      const exported = await exportResources(client, { projects: ['legacy'] });
      const dir = writeExport(exported, 'legacy-config');
      // The config says something else for one of them, and declares one that does not exist.
      const file = join(dir, 'legacy/connectors.yaml');
      writeFileSync(
        file,
        readFileSync(file, 'utf8').replace('    - a\n', '    - b\n') +
          '---\napiVersion: dataplatform/v1\nkind: Connector\nmetadata:\n  name: not-there\n  project: legacy\nspec:\n  connector_type: s3\n',
      );
      const env = { LEGACY_PG_PASSWORD: 'pg-secret-1' };
      const opts: EngineOptions = { sourceId: 'legacy-config', env };

      const first = await adoptResources(client, [dir], { ...opts, trustSecrets: true });
      expect(first.errors).toEqual([]);
      // It records one unkeyed fingerprint (pg's, trusted), and says so.
      expect(first.warnings).toEqual([expect.stringMatching(/^1 resource gets an unkeyed fingerprint of its secrets/)]);
      const status = Object.fromEntries(first.entries.map((e) => [e.name, e.status]));
      expect(status).toEqual({
        legacy: 'adopted',
        pg: 'adopted',
        other: 'adopted',
        drifted: 'differs',
        'not-there': 'missing',
        pii: 'adopted',
      });
      const drifted = first.entries.find((e) => e.name === 'drifted')!;
      expect(drifted.changes).toEqual([{ field: 'selected_tables', before: ['a'], after: ['b'] }]);
      const pg = (await connectors.findByName('pg'))!;
      expect(pg.labels).toMatchObject({ team: 'x', [MANAGED_BY_LABEL]: 'legacy-config' });
      expect(pg.labels![SECRETS_SHA_LABEL]).toMatch(/^[0-9a-f]{16}$/);
      expect((await connectors.findByName('drifted'))!.labels).toEqual({});
      expect(await connectors.findByName('not-there')).toBeUndefined();

      // Now owned: the plan sees them as owned and in sync (secrets trusted), and prune can delete them.
      const { plan } = await preparePlan(client, [dir], opts);
      expect(Object.fromEntries(plan.changes.map((c) => [c.name, `${c.action}/${c.ownership}`]))).toMatchObject({
        pg: 'no-op/owned',
        other: 'no-op/owned',
        pii: 'no-op/owned',
        drifted: 'update/unmanaged',
        'not-there': 'create/new',
      });
      writeFileSync(join(dir, 'legacy/classifications.yaml'), '');
      const pruned = await reconcile(client, [dir], { ...opts, prune: true });
      expect(pruned.result!.converged).toBe(true);
      expect(await classifications.findByName('pii')).toBeUndefined();

      // Without --trust-secrets the fingerprint is not written: the next apply sets the secret again.
      await connectors.create({ name: 'pg2', connector_type: 'postgresql', credentials: { username: 'u', password: 'pg-secret-2' } });
      const dir2 = writeExport(await exportResources(client, { projects: ['legacy'] }), 'legacy2');
      const second = await adoptResources(client, [dir2], {
        sourceId: 'legacy-config',
        env: { LEGACY_PG_PASSWORD: 'pg-secret-1', LEGACY_PG2_PASSWORD: 'pg-secret-2' },
      });
      const pg2 = second.entries.find((e) => e.name === 'pg2')!;
      expect(pg2.status).toBe('adopted');
      // It writes no fingerprint: no warning about one (the plan's is about what an apply would write).
      expect(second.warnings.filter((w) => w.includes('unkeyed'))).toEqual([]);
      expect(pg2.detail).toContain('secrets not checked');
      expect((await connectors.findByName('pg2'))!.labels).toEqual({ [MANAGED_BY_LABEL]: 'legacy-config' });
      expect(second.entries.find((e) => e.name === 'pg')!.status).toBe('owned');
    } finally {
      await client.close();
    }
  });
});
