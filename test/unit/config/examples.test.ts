import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { loadConfig, resolveSecrets, toApiBody, type ConfigDocument } from '../../../src/config/index.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { REPO, lines } from './helpers.js';

/** examples/platform: the realistic repository the README shows and the engine will apply. */
const EXAMPLE = join(REPO, 'examples', 'platform');
const ENV = {
  OPS_BOT_PASSWORD: 'ops-bot-password-1',
  ORDERS_DB_PASSWORD: 'orders-db-password',
  BILLING_DB_PASSWORD: 'billing-db-password',
  ANALYTICS_SLACK_WEBHOOK_URL: 'https://hooks.slack.com/services/T000/B000/XXXX',
  ONCALL_SIGNING_SECRET: 'oncall-signing-secret',
  SALESFORCE_PASSWORD: 'salesforce-password',
};

describe('examples/platform', () => {
  const { config, errors } = loadConfig(EXAMPLE, { cwd: REPO });

  it('validates: two projects, every declarable kind, files read recursively in sorted order', () => {
    expect(lines(errors)).toEqual([]);
    expect(config.files).toEqual([
      'examples/platform/analytics/alerting.yaml',
      'examples/platform/analytics/governance.yaml',
      'examples/platform/analytics/sources.yaml',
      'examples/platform/analytics/transform.yaml',
      'examples/platform/marketing/marketing.yaml',
      'examples/platform/projects.yaml',
      'examples/platform/users.yaml',
    ]);
    expect(new Set(config.documents.map((d) => d.project).filter(Boolean))).toEqual(new Set(['analytics', 'marketing']));
    expect(new Set(config.documents.map((d) => d.yamlKind)).size).toBe(11);
    expect(lines(resolveSecrets(config.documents, { env: ENV }).errors)).toEqual([]);
  });

  describe('against the reference service', () => {
    let svc: TestService;
    let tenant: TestTenant;
    beforeAll(async () => {
      svc = await startTestService();
      tenant = await svc.tenant();
    });
    afterAll(async () => {
      await svc?.service.close();
    });

    it('every body it produces is accepted, references resolved to the ids created', async () => {
      const { secrets } = resolveSecrets(config.documents, { env: ENV });
      const ids = new Map<string, string>();
      const key = (kind: string, project: string | undefined, name: string) => `${kind}/${project ?? ''}/${name}`;
      const pending = [...config.documents];
      // Referenced before referencing: a document waits until every reference it makes has an id.
      const ready = (doc: ConfigDocument) =>
        doc.references.every((r) => ids.has(key(r.kind, doc.project, r.name))) &&
        (doc.project === undefined || ids.has(key('project', undefined, doc.project)));
      while (pending.length) {
        const next = pending.findIndex(ready);
        expect(next, `no document can be created next among ${pending.map((d) => d.name).join(', ')}`).toBeGreaterThanOrEqual(0);
        const [doc] = pending.splice(next, 1);
        const body = toApiBody(doc, (k, p, n) => ids.get(key(k, p, n)), secrets);
        const path =
          doc.project === undefined
            ? `/${doc.descriptor.collection}`
            : `/projects/${ids.get(key('project', undefined, doc.project))}/${doc.descriptor.collection}`;
        const created = await svc.ok(tenant, 'POST', path, { body });
        ids.set(key(doc.descriptor.kind, doc.project, doc.name), created.id);
      }
      expect(ids.size).toBe(config.documents.length);
    });
  });
});
