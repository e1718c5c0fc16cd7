import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DataPlatformClient } from '../../../src/client/index.js';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import { haveTerraform, TerraformWorkspace } from './harness.js';

/**
 * The provider block configures the provider on its own: no DATAPLATFORM_* variable at all in
 * Terraform's environment (nor, therefore, in the provider's), only `endpoint`, `api_key` (a
 * project-scoped admin key) and `ca_file`, or `DATAPLATFORM_INSECURE=1` instead of a CA.
 */
describe.skipIf(testStore() === 'postgres' || !haveTerraform)('provider block configuration (real terraform)', () => {
  let svc: TestService;
  let t: TestTenant;
  let ws: TerraformWorkspace;
  let client: DataPlatformClient;
  let projectId: string;
  let key: { id: string; key: string };
  let endpoint: string;

  /** Terraform wraps a diagnostic's detail at 78 columns. */
  const flat = (out: string) => out.replace(/\s+/g, ' ');
  const config = (providerBody: string, channels: string[]) =>
    `terraform {\n  required_providers {\n    dataplatform = {\n      source  = "dataplatform/dataplatform"\n      version = "0.1.0"\n    }\n  }\n}\n\n` +
    `variable "api_key" {\n  type      = string\n  sensitive = true\n}\n\n` +
    `provider "dataplatform" {\n${providerBody}}\n` +
    channels
      .map(
        (name) =>
          `\nresource "dataplatform_notification_channel" "${name}" {\n  project_id = "${projectId}"\n  name       = "${name}"\n  type       = "email"\n  config     = { email_addresses = ["${name}@example.com"] }\n}\n`,
      )
      .join('');

  beforeAll(async () => {
    svc = await startTestService();
    t = await svc.tenant();
    endpoint = svc.url(t.slug).replace(/\/api\/v1$/, '');
    client = new DataPlatformClient({ url: endpoint, email: t.adminEmail, password: t.adminPassword, caFile: svc.service.tls.certPath });
    projectId = (await client.projects.create({ name: 'keyed' })).id;
    const created = await client.apiKeys(projectId).create({ name: 'terraform', permission_level: 'admin' });
    key = { id: created.id, key: created.key as string };
    expect(key.key).toBeTruthy();
    ws = await TerraformWorkspace.create(svc, t);
    for (const name of Object.keys(ws.env)) if (name.startsWith('DATAPLATFORM_')) delete ws.env[name];
    ws.vars.api_key = key.key;
    ws.write(
      'main.tf',
      config(`  endpoint = "${endpoint}"\n  api_key  = var.api_key\n  ca_file  = "${svc.service.tls.certPath}"\n`, ['by_key']),
    );
    await ws.init();
  }, 60_000);

  afterAll(async () => {
    await client?.close();
    await svc?.close();
    ws?.close();
  });

  it(
    'applies with endpoint, api_key and ca_file from the block and no DATAPLATFORM_* anywhere; then insecure from DATAPLATFORM_INSECURE',
    { timeout: 120_000 },
    async () => {
      expect(Object.keys(ws.env).filter((k) => k.startsWith('DATAPLATFORM_'))).toEqual([]);
      expect((await client.apiKeys(projectId).get(key.id)).last_used_at).toBeNull();
      expect(await ws.apply()).toContain('Apply complete! Resources: 1 added, 0 changed, 0 destroyed.');
      const channels = await client.resources('notification_channel', { projectId }).listAll();
      expect(channels.map((c) => c.name)).toEqual(['by_key']);
      // The key did the work (the provider had no other credential).
      expect((await client.apiKeys(projectId).get(key.id)).last_used_at).toBeTruthy();
      expect((await ws.plan()).code).toBe(0);

      // Another key value in the block is what gets sent: refused once, when the provider starts,
      // with what to check (not by each resource's read).
      const wrong = await ws.tf(['plan', '-input=false', '-var', 'api_key=dpk_not_a_real_key'], [1]);
      expect(wrong.out).toContain('Error: Invalid or revoked API key');
      expect(flat(wrong.out)).toContain('(HTTP 401 unauthorized on GET /projects,');
      expect(flat(wrong.out)).toContain('The provider checks the service and its credentials when it starts');
      expect(flat(wrong.out)).toContain(
        "The service did not accept the credentials: check the provider block's api_key (DATAPLATFORM_API_KEY)",
      );
      expect(wrong.out.match(/^Error: /gm)).toHaveLength(1);
      expect(wrong.out).not.toContain(key.key);
      // skip_credentials_validation = true: no check; the read of the channel is refused instead.
      ws.write(
        'main.tf',
        config(
          `  endpoint = "${endpoint}"\n  api_key  = var.api_key\n  ca_file  = "${svc.service.tls.certPath}"\n  skip_credentials_validation = true\n`,
          ['by_key'],
        ),
      );
      const unchecked = await ws.tf(['plan', '-input=false', '-var', 'api_key=dpk_not_a_real_key'], [1]);
      expect(unchecked.out).toContain('Error: Invalid or revoked API key');
      expect(flat(unchecked.out)).toContain('(HTTP 401 unauthorized on GET /projects/{id}/notification-channels/{resourceId}');
      expect((await ws.plan()).code).toBe(0);

      // No ca_file and no DATAPLATFORM_INSECURE: the service's certificate is not trusted.
      ws.write('main.tf', config(`  endpoint = "${endpoint}"\n  api_key  = var.api_key\n`, ['by_key', 'insecure']));
      const untrusted = await ws.tf(['plan', '-input=false'], [1]);
      expect(untrusted.out).toMatch(/^Error: GET https:\/\/.* failed: /m);
      expect(flat(untrusted.out)).toContain(
        "the service's certificate is not trusted: point DATAPLATFORM_CA_FILE (dpctl --ca-file, the provider's ca_file) at its CA certificate",
      );

      // DATAPLATFORM_INSECURE=1 (the only DATAPLATFORM_* variable) and no ca_file: works.
      ws.env.DATAPLATFORM_INSECURE = '1';
      expect(await ws.apply()).toContain('Apply complete! Resources: 1 added, 0 changed, 0 destroyed.');
      expect((await ws.plan()).code).toBe(0);
      expect((await client.resources('notification_channel', { projectId }).listAll()).map((c) => c.name).sort()).toEqual([
        'by_key',
        'insecure',
      ]);
    },
  );

  it(
    'two credentials, or a CA file with insecure = true, in the block: refused at the attribute by validate and by plan',
    { timeout: 60_000 },
    async () => {
      ws.write(
        'main.tf',
        config(
          `  endpoint = "${endpoint}"
  api_key  = "dpk_in_the_block"
  email    = "someone@example.com"
  ca_file  = "${svc.service.tls.certPath}"
  insecure = true
`,
          ['by_key'],
        ),
      );
      const validate = await ws.tf(['validate'], [1]);
      expect(validate.out).toContain('Error: give either api_key or email and password, not both');
      expect(validate.out).toMatch(/on main\.tf line (\d+), in provider "dataplatform":\n\s*\1:\s+email\s+= "someone@example.com"/);
      expect(validate.out).toContain('Error: give either ca_file or insecure = true, not both');
      expect(validate.out).toMatch(/on main\.tf line (\d+), in provider "dataplatform":\n\s*\1:\s+insecure = true/);
      expect(validate.out).not.toContain('dpk_in_the_block');

      // The key from a variable is unknown to validate but known to plan, which refuses it there.
      ws.write(
        'main.tf',
        config(
          `  endpoint = "${endpoint}"
  api_key  = var.api_key
  password = "a-password"
  ca_file  = "${svc.service.tls.certPath}"
`,
          ['by_key'],
        ),
      );
      const plan = await ws.tf(['plan', '-input=false'], [1]);
      expect(plan.out).toContain('Error: give either api_key or email and password, not both');
      expect(flat(plan.out)).toContain('The provider block sets api_key and password.');
      expect(plan.out).not.toContain(key.key);
    },
  );
  it(
    'reads the key from DATAPLATFORM_API_KEY_FILE, as dpctl does: the file wins over DATAPLATFORM_API_KEY',
    { timeout: 60_000 },
    async () => {
      const keyFile = join(ws.root, 'api-key');
      writeFileSync(keyFile, `${key.key}\n`, { mode: 0o600 });
      for (const name of Object.keys(ws.env)) if (name.startsWith('DATAPLATFORM_')) delete ws.env[name];
      Object.assign(ws.env, { DATAPLATFORM_API_KEY_FILE: keyFile, DATAPLATFORM_API_KEY: 'dpk_not_a_real_key' });
      ws.write('main.tf', config(`  endpoint = "${endpoint}"\n  ca_file  = "${svc.service.tls.certPath}"\n`, ['from_file']));
      const apply = await ws.tf(['apply', '-input=false', '-auto-approve'], [0]);
      expect(apply.out).toContain('Apply complete!');
      expect((await client.resources('notification_channel', { projectId }).listAll()).map((c) => c.name)).toContain('from_file');

      ws.env.DATAPLATFORM_API_KEY_FILE = join(ws.root, 'no-such-key');
      const missing = await ws.tf(['plan', '-input=false'], [1]);
      expect(flat(missing.out)).toContain(`DATAPLATFORM_API_KEY_FILE ${join(ws.root, 'no-such-key')}: no such file`);
    },
  );
});
