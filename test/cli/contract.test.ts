import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { DataPlatformClient } from '../../src/client/index.js';
import { UNTRUSTED_CERTIFICATE_HINT, WRONG_HOST_HINT } from '../../src/client/transport.js';
import { runDpctl } from '../support/cli.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { clientFor, cliEnvFor, copyExample, edit } from '../integration/engine/helpers.js';

/** The health section plan and drift print after an apply: these connectors have never run (nothing synced them yet). */
const neverRun = (...subjects: string[]) =>
  `Health (as observed): ${subjects.length} never run (untested)\n${subjects.map((s) => `  ? ${s}: never run (untested)\n`).join('')}` +
  `  never run: nothing has shown yet that ${subjects.length === 1 ? 'it works' : 'they work'}; \`dpctl apply --test-connections\` tests the connection now, the first run does anyway.\n`;
const EXAMPLE_CONNECTORS = ['Connector analytics/orders-db', 'Connector analytics/billing-db', 'Connector marketing/crm'];

/**
 * The dpctl contract as README documents it, through the built binary against a real service
 * over HTTPS: every command's help, API-key credentials (env and flags), TLS trust,
 * drift in sync, --prune with its mass-delete guard, and exit 1 when an apply does not converge.
 */

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => {
  await svc?.close();
});

const envFor = (t: TestTenant) => cliEnvFor(svc, t);

/** No DATAPLATFORM_* variable at all: everything must come from flags. */
const NO_DATAPLATFORM_ENV = {
  DATAPLATFORM_URL: '',
  DATAPLATFORM_API_KEY: '',
  DATAPLATFORM_EMAIL: '',
  DATAPLATFORM_PASSWORD: '',
  DATAPLATFORM_CA_FILE: '',
  DATAPLATFORM_INSECURE: '',
};

/** A config directory named `name` (the default source id) with the given files. */
function configDir(name: string, files: Record<string, string>): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'dp-contract-')), name);
  mkdirSync(dir);
  for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text);
  return dir;
}

/** Sorted names of a kind in a project, as the API lists them. */
async function names(client: DataPlatformClient, kind: string, projectId: string): Promise<string[]> {
  return (await client.resourcesOf(kind, { projectId }).listAll()).map((r) => String(r.name)).sort();
}

async function projectId(client: DataPlatformClient, name: string): Promise<string> {
  const p = (await client.projects.listAll()).find((x) => x.name === name);
  if (!p) throw new Error(`no project ${name}`);
  return p.id;
}

/** A connector (with a secretRef) and a channel in project `project`, and no Project document. */
const projectResources = (project: string, schedule = '0 * * * *') => `apiVersion: dataplatform/v1
kind: Connector
metadata:
  name: warehouse-db
  project: ${project}
spec:
  connector_type: postgresql
  config:
    host: warehouse.db.internal
    port: 5432
    database: warehouse
  credentials:
    username: loader
    password:
      secretRef:
        env: WAREHOUSE_DB_PASSWORD
  selected_tables: [public.events]
  schedule: "${schedule}"
---
apiVersion: dataplatform/v1
kind: NotificationChannel
metadata:
  name: team-email
  project: ${project}
spec:
  type: email
  config:
    email_addresses: [team@example.com]
`;

describe('dpctl --help', () => {
  test('dpctl --help lists every command; --version; unknown commands and options exit 1', async () => {
    const r = await runDpctl(['--help']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Usage: dpctl \[options\] \[command\]$/m);
    for (const cmd of [
      'serve [options]',
      'tenant',
      'validate [options] <paths...>',
      'plan [options] <path>',
      'apply [options] <path>',
      'drift [options] <path>',
      'export [options]',
      'adopt [options] <path>',
      'provider',
      'controller [options]',
    ]) {
      expect(r.stdout).toMatch(new RegExp(`^  ${cmd.replace(/[[\].]/g, '\\$&')}  `, 'm'));
    }

    const [version, unknown, badOption, noPath] = await Promise.all([
      runDpctl(['--version']),
      runDpctl(['frobnicate']),
      runDpctl(['plan', '--bogus', 'x']),
      runDpctl(['plan']),
    ]);
    expect(version).toMatchObject({ code: 0, stdout: '0.1.0\n' });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("error: unknown command 'frobnicate'");
    expect(badOption.code).toBe(1);
    expect(badOption.stderr).toContain("error: unknown option '--bogus'");
    expect(noPath.code).toBe(1);
    expect(noPath.stderr).toContain("error: missing required argument 'path'");
  });

  const CONNECTION = ['--url <url>', '--api-key <key>', '--ca-file <file>', '--insecure'];
  const COMMON = [
    ...CONNECTION,
    '--source-id <id>',
    '-o, --output <format>',
    '--concurrency <n>',
    '--allow-undeclared-projects',
    '--spec-operations',
  ];
  const cases: { args: string[]; usage: string; flags: string[]; not?: string[] }[] = [
    {
      args: ['serve'],
      usage: 'dpctl serve [options]',
      flags: ['--port <port>', '--data-dir <dir>', '--database-url <url>', '--demo', '--reconcile <dir>'],
    },
    { args: ['tenant'], usage: 'dpctl tenant [options] [command]', flags: ['create [options] <slug>'] },
    { args: ['tenant', 'create'], usage: 'dpctl tenant create [options] <slug>', flags: ['--admin-email <email>', '--data-dir <dir>'] },
    {
      args: ['validate'],
      usage: 'dpctl validate [options] <paths...>',
      flags: ['--check-secrets', '--allow-undeclared-projects'],
      not: ['--url <url>'],
    },
    { args: ['plan'], usage: 'dpctl plan [options] <path>', flags: [...COMMON, '--adopt', '--prune', '--allow-mass-delete'] },
    { args: ['apply'], usage: 'dpctl apply [options] <path>', flags: [...COMMON, '--adopt', '--prune', '--allow-mass-delete'] },
    { args: ['drift'], usage: 'dpctl drift [options] <path>', flags: COMMON, not: ['--adopt', '--prune', '--allow-mass-delete'] },
    {
      args: ['export'],
      usage: 'dpctl export [options]',
      flags: [...CONNECTION, '--project <name>', '--all-projects', '--users', '--out <dir>'],
    },
    { args: ['adopt'], usage: 'dpctl adopt [options] <path>', flags: [...COMMON, '--trust-secrets', '--dry-run'], not: ['--adopt'] },
    {
      args: ['init'],
      usage: 'dpctl init [options] [dir]',
      flags: ['--format <format>', '--force', '--package-spec <spec>'],
      not: ['--url <url>'],
    },
    { args: ['provider'], usage: 'dpctl provider [options] [command]', flags: ['package [options]', 'install [options]'] },
    { args: ['provider', 'package'], usage: 'dpctl provider package [options]', flags: ['--out <dir>'] },
    {
      args: ['provider', 'install'],
      usage: 'dpctl provider install [options]',
      flags: ['--dir <mirror>', '--from <release>', '--platform <os_arch...>'],
    },
    {
      args: ['controller'],
      usage: 'dpctl controller [options]',
      flags: [
        ...CONNECTION,
        '--source <git-url-or-dir>',
        '--mode <mode>',
        '--interval <duration>',
        '--prune',
        '--allow-mass-delete',
        '--leader-election <kind>',
        '--source-id <id>',
        '--secrets-dir <dir>',
      ],
    },
  ];
  test.concurrent.each(cases)('dpctl $args --help: exit 0, usage line and its real flags', async ({ args, usage, flags, not }) => {
    const r = await runDpctl([...args, '--help']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')[0]).toBe(`Usage: ${usage}`);
    for (const flag of [...flags, '-h, --help']) expect(r.stdout).toMatch(new RegExp(`^  ${flag.replace(/[[\].]/g, '\\$&')}(  |$)`, 'm'));
    for (const flag of not ?? []) expect(r.stdout).not.toContain(flag);
  });
});

describe('credentials: a project API key instead of email and password', () => {
  let t: TestTenant;
  let client: DataPlatformClient;
  let keyed: string;
  let readWrite: string;
  let readOnly: string;
  const dir = configDir('keyed', { 'resources.yaml': projectResources('keyed') });
  const secrets = { WAREHOUSE_DB_PASSWORD: 'warehouse-pw-1' };
  let keyEnv: Record<string, string>;

  beforeAll(async () => {
    t = await svc.tenant();
    client = clientFor(svc, t);
    keyed = (await client.projects.create({ name: 'keyed' })).id;
    readWrite = (await client.apiKeys(keyed).create({ name: 'dpctl-ci', permission_level: 'read-write' })).key!;
    readOnly = (await client.apiKeys(keyed).create({ name: 'dpctl-viewer', permission_level: 'read-only' })).key!;
    expect(readWrite).toMatch(/^dpk_/);
    keyEnv = {
      ...secrets,
      DATAPLATFORM_URL: `https://${t.slug}.localhost:${svc.port}`,
      DATAPLATFORM_API_KEY: readWrite,
      DATAPLATFORM_CA_FILE: svc.service.tls.certPath,
      DATAPLATFORM_EMAIL: '',
      DATAPLATFORM_PASSWORD: '',
      DATAPLATFORM_INSECURE: '',
    };
  });
  afterAll(async () => {
    await client?.close();
  });

  test('from DATAPLATFORM_API_KEY: plan exit 2, apply exit 0 and created, plan again exit 0, drift exit 0', async () => {
    const [undeclared, plan] = await Promise.all([
      runDpctl(['plan', dir], { env: keyEnv }),
      runDpctl(['plan', dir, '--allow-undeclared-projects'], { env: keyEnv }),
    ]);
    expect(undeclared.code).toBe(1);
    expect(undeclared.stderr).toContain(
      'metadata.project: no Project document named "keyed" (declare it, or allow projects that exist on the server with --allow-undeclared-projects)',
    );
    expect(plan.stderr).toBe('');
    expect(plan.code).toBe(2);
    expect(plan.stdout).toContain('  + Connector keyed/warehouse-db: create');
    expect(plan.stdout).toContain('      credentials = {"username":"loader","password":"(sensitive)"}');
    expect(plan.stdout).toContain('  + NotificationChannel keyed/team-email: create');
    expect(plan.stdout).not.toContain('warehouse-pw-1');
    expect(plan.stdout).toMatch(/Plan: 2 to create, 0 to update, 0 to replace, 0 to delete, 0 unchanged\.\n$/);

    const apply = await runDpctl(['apply', dir, '--allow-undeclared-projects'], { env: keyEnv });
    expect(apply.stderr).toBe('');
    expect(apply.code).toBe(0);
    expect(apply.stdout).toMatch(/^\+ Connector keyed\/warehouse-db: created \(con_/m);
    expect(apply.stdout).toMatch(/^\+ NotificationChannel keyed\/team-email: created \(chn_/m);
    expect(apply.stdout).toContain('Apply complete: 2 done, 0 failed, 0 skipped, 0 not supported.');
    const [connector] = await client.resources('connector', { projectId: keyed }).listAll();
    expect(connector).toMatchObject({ name: 'warehouse-db', schedule: '0 * * * *', labels: { 'dpctl.dev/managed-by': 'keyed' } });
    expect(await names(client, 'notification_channel', keyed)).toEqual(['team-email']);

    const again = await runDpctl(['plan', dir, '--allow-undeclared-projects'], { env: keyEnv });
    expect(again.code).toBe(0);
    expect(again.stdout).toBe(`${neverRun('Connector keyed/warehouse-db')}No changes: 2 resources in sync.\n`);
    const drift = await runDpctl(['drift', dir, '--allow-undeclared-projects'], { env: keyEnv });
    expect(drift.stderr).toBe('');
    expect(drift.code).toBe(0);
    expect(drift.stdout).toBe(`No drift: the platform matches the config.\n${neverRun('Connector keyed/warehouse-db')}`);
  });

  test('from mounted secret files (DATAPLATFORM_API_KEY_FILE, DATAPLATFORM_PASSWORD_FILE), as the controller reads them', async () => {
    const files = mkdtempSync(join(tmpdir(), 'dp-contract-secrets-'));
    writeFileSync(join(files, 'key'), `${readOnly}\n`);
    writeFileSync(join(files, 'revoked'), 'dpk_not_a_key_of_this_tenant\n');
    writeFileSync(join(files, 'password'), `${t.adminPassword}\n`);
    const plan = (env: Record<string, string>) => runDpctl(['plan', dir, '--allow-undeclared-projects'], { env: { ...keyEnv, ...env } });
    const [byVariable, byKey, byBadKey, byPassword, missing] = await Promise.all([
      plan({}),
      plan({ DATAPLATFORM_API_KEY: '', DATAPLATFORM_API_KEY_FILE: join(files, 'key') }),
      // The file wins over the variable: with a key the service refuses, the valid variable is not used.
      plan({ DATAPLATFORM_API_KEY_FILE: join(files, 'revoked') }),
      plan({ DATAPLATFORM_API_KEY: '', DATAPLATFORM_EMAIL: t.adminEmail, DATAPLATFORM_PASSWORD_FILE: join(files, 'password') }),
      plan({ DATAPLATFORM_API_KEY_FILE: join(files, 'nope') }),
    ]);
    // The same plan as with the key in DATAPLATFORM_API_KEY.
    for (const r of [byKey, byPassword]) {
      expect(r.stderr).toBe('');
      expect(r.code).toBe(byVariable.code);
      expect(r.stdout).toBe(byVariable.stdout);
    }
    expect(byBadKey.code).toBe(1);
    expect(byBadKey.stderr).toMatch(/401/);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(`dpctl: DATAPLATFORM_API_KEY_FILE ${join(files, 'nope')}: no such file\n`);
  });

  test('from --url, --api-key and --ca-file with no DATAPLATFORM_* variable: plan, apply, plan, drift', async () => {
    edit(dir, 'resources.yaml', 'schedule: "0 * * * *"', 'schedule: "15 * * * *"');
    const flags = [
      '--allow-undeclared-projects',
      '--url',
      `https://${t.slug}.localhost:${svc.port}`,
      '--api-key',
      readWrite,
      '--ca-file',
      svc.service.tls.certPath,
    ];
    const env = { ...secrets, ...NO_DATAPLATFORM_ENV };
    // Without the flags (and without the variables) there is nothing to connect to.
    const [plan, none] = await Promise.all([
      runDpctl(['plan', dir, ...flags], { env }),
      runDpctl(['plan', dir, '--allow-undeclared-projects'], { env }),
    ]);
    expect(none.code).toBe(1);
    expect(none.stderr).toBe('dpctl: DATAPLATFORM_URL is not set (for example https://acme.localhost:8443)\n');
    expect(plan.stderr).toBe('');
    expect(plan.code).toBe(2);
    expect(plan.stdout).toMatch(
      /^ {2}~ Connector keyed\/warehouse-db \(con_[^)]+\): update\n {6}schedule: "0 \* \* \* \*" -> "15 \* \* \* \*"$/m,
    );
    const apply = await runDpctl(['apply', dir, ...flags], { env });
    expect(apply.code).toBe(0);
    expect(apply.stdout).toContain('~ Connector keyed/warehouse-db: updated (schedule)');
    expect(apply.stdout).toContain('Apply complete: 1 done, 0 failed');
    expect((await client.resources('connector', { projectId: keyed }).listAll())[0].schedule).toBe('15 * * * *');
    expect((await runDpctl(['plan', dir, ...flags], { env })).code).toBe(0);
    const drift = await runDpctl(['drift', dir, ...flags], { env });
    expect(drift.code).toBe(0);
    expect(drift.stdout).toBe(`No drift: the platform matches the config.\n${neverRun('Connector keyed/warehouse-db')}`);
  });

  test('a read-only key: plan works, apply exits 1 with the missing permission (403) and changes nothing', async () => {
    edit(dir, 'resources.yaml', 'schedule: "15 * * * *"', 'schedule: "45 * * * *"');
    const env = { ...keyEnv, DATAPLATFORM_API_KEY: readOnly };
    // Both a key and an email + password in the environment is refused before anything is sent.
    const [plan, both] = await Promise.all([
      runDpctl(['plan', dir, '--allow-undeclared-projects'], { env }),
      runDpctl(['plan', dir, '--allow-undeclared-projects'], { env: { ...envFor(t), ...secrets, DATAPLATFORM_API_KEY: readWrite } }),
    ]);
    expect(both.code).toBe(1);
    expect(both.stderr).toBe('dpctl: give either an API key or an email and password, not both\n');
    expect(plan.code).toBe(2);
    expect(plan.stdout).toContain('Plan: 0 to create, 1 to update, 0 to replace, 0 to delete, 1 unchanged.');
    const apply = await runDpctl(['apply', dir, '--allow-undeclared-projects'], { env });
    expect(apply.code).toBe(1);
    expect(apply.stdout).toMatch(
      /^x Connector keyed\/warehouse-db: failed: This operation needs read-write permission; the API key has read-only \(HTTP 403 forbidden on PATCH \/projects\/\{id\}\/connectors\/\{resourceId\}, request id req_[\w-]+\)$/m,
    );
    expect(apply.stdout).toContain('Apply incomplete: 0 done, 1 failed, 0 skipped, 0 not supported.');
    expect(apply.stdout).not.toContain(readOnly);
    expect(apply.stderr).not.toContain(readOnly);
    expect((await client.resources('connector', { projectId: keyed }).listAll())[0].schedule).toBe('15 * * * *');

    // --api-key wins over DATAPLATFORM_EMAIL + DATAPLATFORM_PASSWORD (the admin's, who could apply this).
    const flagWins = await runDpctl(['apply', dir, '--allow-undeclared-projects', '--api-key', readOnly], {
      env: { ...envFor(t), ...secrets },
    });
    expect(flagWins.code).toBe(1);
    expect(flagWins.stdout).toContain('failed: This operation needs read-write permission; the API key has read-only (HTTP 403 forbidden');
    expect((await client.resources('connector', { projectId: keyed }).listAll())[0].schedule).toBe('15 * * * *');
  });
});

describe('TLS trust: DATAPLATFORM_CA_FILE, DATAPLATFORM_INSECURE and their flags', () => {
  let t: TestTenant;
  let env: Record<string, string>;
  const dir = copyExample();
  beforeAll(async () => {
    t = await svc.tenant();
    env = envFor(t);
  });
  const PLANNED = /Plan: 25 to create, 0 to update, 0 to replace, 0 to delete, 0 unchanged\.\n$/;

  test('DATAPLATFORM_INSECURE=1 (or --insecure) without a CA file: the plan works', async () => {
    const noCa = { ...env, DATAPLATFORM_CA_FILE: '' };
    const [variable, flag] = await Promise.all([
      runDpctl(['plan', dir], { env: { ...noCa, DATAPLATFORM_INSECURE: '1' } }),
      runDpctl(['plan', dir, '--insecure'], { env: noCa }),
    ]);
    expect(variable.stderr).toBe('');
    expect(variable.code).toBe(2);
    expect(variable.stdout).toMatch(PLANNED);
    expect(flag.stderr).toBe('');
    expect(flag.code).toBe(2);
    expect(flag.stdout).toMatch(PLANNED);
  });

  test('neither a CA file nor insecure: exit 1 with the certificate error, no credential in it', async () => {
    const [neither, zero, missing] = await Promise.all([
      runDpctl(['plan', dir], { env: { ...env, DATAPLATFORM_CA_FILE: '', DATAPLATFORM_INSECURE: '' } }),
      // DATAPLATFORM_INSECURE=0 is not "insecure".
      runDpctl(['plan', dir], { env: { ...env, DATAPLATFORM_CA_FILE: '', DATAPLATFORM_INSECURE: '0' } }),
      runDpctl(['plan', dir], { env: { ...env, DATAPLATFORM_CA_FILE: '/nonexistent/ca.pem' } }),
    ]);
    expect(neither.code).toBe(1);
    expect(neither.stdout).toBe('');
    // The first request (the login) fails on the service's self-signed CA: the message names the
    // certificate problem and the URL...
    expect(neither.stderr).toMatch(
      new RegExp(
        `^dpctl: POST https://${t.slug}\\.localhost:${svc.port}/api/v1/auth/login failed: UNABLE_TO_VERIFY_LEAF_SIGNATURE unable to verify the first certificate \\(.*\\)\\n$`,
      ),
    );
    // ...and says what to do.
    expect(neither.stderr).toContain(`(${UNTRUSTED_CERTIFICATE_HINT})`);
    expect(neither.stderr).not.toContain(t.adminPassword);
    expect(zero.code).toBe(1);
    expect(zero.stderr).toContain('UNABLE_TO_VERIFY_LEAF_SIGNATURE');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^dpctl: cannot read the CA file \/nonexistent\/ca\.pem: ENOENT/);
  });

  test('a mistyped tenant in the URL: the certificate error says to check the tenant', async () => {
    const typo = await runDpctl(['plan', dir], { env: { ...env, DATAPLATFORM_URL: `https://${t.slug}x.localhost:${svc.port}` } });
    expect(typo.code).toBe(1);
    expect(typo.stderr).toContain('ERR_TLS_CERT_ALTNAME_INVALID');
    expect(typo.stderr).toContain(`(${WRONG_HOST_HINT})`);
  });

  test('a CA file and insecure together: refused from the environment; a flag overrides the other variable', async () => {
    const [both, caFlag, insecureFlag] = await Promise.all([
      runDpctl(['plan', dir], { env: { ...env, DATAPLATFORM_INSECURE: '1' } }),
      runDpctl(['plan', dir, '--ca-file', svc.service.tls.certPath], {
        env: { ...env, DATAPLATFORM_CA_FILE: '', DATAPLATFORM_INSECURE: '1' },
      }),
      runDpctl(['plan', dir, '--insecure'], { env }),
    ]);
    expect(both.code).toBe(1);
    expect(both.stderr).toBe(
      'dpctl: DATAPLATFORM_CA_FILE and DATAPLATFORM_INSECURE are both set: unset one (a CA to trust, or no verification at all)\n',
    );
    expect(caFlag.stderr).toBe('');
    expect(caFlag.code).toBe(2);
    expect(caFlag.stdout).toMatch(PLANNED);
    expect(insecureFlag.stderr).toBe('');
    expect(insecureFlag.code).toBe(2);
    expect(insecureFlag.stdout).toMatch(PLANNED);
  });
});

describe('dpctl drift right after an apply', () => {
  test('exit 0 and no drift entries (text and JSON)', async () => {
    const t = await svc.tenant();
    const env = envFor(t);
    const dir = copyExample();
    const apply = await runDpctl(['apply', dir], { env });
    expect(apply.code).toBe(0);
    expect(apply.stdout).toContain('Apply complete: 25 done, 0 failed');
    const [text, json] = await Promise.all([runDpctl(['drift', dir], { env }), runDpctl(['drift', dir, '--output', 'json'], { env })]);
    expect(text.stderr).toBe('');
    expect(text.code).toBe(0);
    expect(text.stdout).toBe(`No drift: the platform matches the config.\n${neverRun(...EXAMPLE_CONNECTORS)}`);
    expect(json.stderr).toBe('');
    expect(json.code).toBe(0);
    const report = JSON.parse(json.stdout);
    expect(report).toEqual({
      source_id: 'platform',
      summary: { changed: 0, deleted: 0, orphaned: 0, unmanaged: 0 },
      drift: [],
      errors: [],
      problems: [],
      health: expect.any(Array),
      secrets_not_compared: [],
    });
    // Applied and waited for: everything declared is healthy (the warehouse was provisioned).
    expect(report.health.length).toBe(25);
    expect(report.health.filter((h: { health: string }) => h.health !== 'healthy')).toEqual([]);
  });
});

describe('dpctl apply --prune', () => {
  let t: TestTenant;
  let env: Record<string, string>;
  let client: DataPlatformClient;
  let analytics: string;
  let marketing: string;
  const dir = copyExample();
  const MARKETING_KINDS = ['connector', 'notification_channel', 'pipeline', 'alert_rule', 'classification', 'masking_policy'];
  const marketingNames = async () => (await Promise.all(MARKETING_KINDS.map((k) => names(client, k, marketing)))).flat().sort();

  beforeAll(async () => {
    t = await svc.tenant();
    env = envFor(t);
    client = clientFor(svc, t);
    const apply = await runDpctl(['apply', dir], { env });
    expect(apply.code, apply.stdout + apply.stderr).toBe(0);
    analytics = await projectId(client, 'analytics');
    marketing = await projectId(client, 'marketing');
  });
  afterAll(async () => {
    await client?.close();
  });

  test('deletes a document removed from the config, never a hand-made resource of the same project', async () => {
    await client.resources('classification', { projectId: analytics }).create({ name: 'by-hand', sensitivity: 'internal' });
    // Nothing references an alert rule.
    edit(
      dir,
      'analytics/alerting.yaml',
      /---\napiVersion: dataplatform\/v1\nkind: AlertRule\nmetadata:\n {2}name: orders-stale\n[\s\S]*$/,
      '',
    );

    const plain = await runDpctl(['plan', dir], { env });
    expect(plain.code).toBe(0);
    // Without --prune the removed rule stays, and the plan says so.
    expect(plain.stdout).toBe(
      `warning: 1 managed resource is no longer in the config and kept (AlertRule analytics/orders-stale): --prune deletes it, dpctl drift lists it; if it belongs to another repository, give each repository its own --source-id (this one is "platform")\n${neverRun(...EXAMPLE_CONNECTORS)}No changes: 24 resources in sync.\n`,
    );

    const apply = await runDpctl(['apply', dir, '--prune'], { env });
    expect(apply.stderr).toBe('');
    expect(apply.code).toBe(0);
    expect(apply.stdout).toMatch(
      /^ {2}- AlertRule analytics\/orders-stale \(arl_[^)]+\): delete\n {6}# managed by this source and no longer in the config$/m,
    );
    expect(apply.stdout).toContain('Plan: 0 to create, 0 to update, 0 to replace, 1 to delete, 24 unchanged.');
    expect(apply.stdout).toMatch(/^- AlertRule analytics\/orders-stale: deleted$/m);
    expect(apply.stdout).toContain('Apply complete: 1 done, 0 failed, 0 skipped, 0 not supported.');
    expect(apply.stdout).not.toContain('by-hand');
    expect(await names(client, 'alert_rule', analytics)).toEqual(['revenue-pipeline-failed']);
    expect(await names(client, 'classification', analytics)).toEqual(['by-hand', 'payment-card', 'pii-email']);

    const again = await runDpctl(['plan', dir, '--prune'], { env });
    expect(again.code).toBe(0);
    expect(again.stdout).toBe(`${neverRun(...EXAMPLE_CONNECTORS)}No changes: 24 resources in sync.\n`);
  });

  test('mass-delete guard: more than max(5, 20%) of the managed resources is refused without --allow-mass-delete', async () => {
    // 22 managed (25 minus 2 users minus the pruned rule): the limit is max(5, floor(22 * 0.2)) = 5.
    // Five deletes are allowed: marketing without everything but its connector.
    writeFileSync(
      join(dir, 'marketing', 'marketing.yaml'),
      `apiVersion: dataplatform/v1
kind: Connector
metadata:
  name: crm
  project: marketing
spec:
  connector_type: salesforce
  config:
    extra:
      instance_url: https://example.my.salesforce.com
  credentials:
    username: integration@example.com
    password:
      secretRef:
        env: SALESFORCE_PASSWORD
  selected_tables: [Account, Opportunity, Campaign]
  schedule: "15 */4 * * *"
`,
    );
    const five = await runDpctl(['plan', dir, '--prune'], { env });
    expect(five.code).toBe(2);
    expect(five.stdout).toContain('Plan: 0 to create, 0 to update, 0 to replace, 5 to delete, 19 unchanged.');
    expect(five.stdout).not.toContain('refusing');

    // Six are not: marketing's whole file goes (its Project document stays).
    rmSync(join(dir, 'marketing', 'marketing.yaml'));
    const refusal =
      'error: refusing to delete 6 of 22 managed resources (more than 5, the larger of 5 and 20%): check the path and --source-id, or pass --allow-mass-delete';
    const plan = await runDpctl(['plan', dir, '--prune'], { env });
    expect(plan.code).toBe(1);
    expect(plan.stdout).toContain(refusal);
    const refused = await runDpctl(['apply', dir, '--prune'], { env });
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain(refusal);
    expect(refused.stderr).toBe('dpctl: nothing applied: the plan has errors\n');
    expect(refused.stdout).not.toMatch(/: deleted$/m);
    expect(await marketingNames()).toEqual(['crm', 'crm-sync', 'crm-sync-failed', 'growth-email', 'pii-phone', 'redact-phones']);

    const allowed = await runDpctl(['apply', dir, '--prune', '--allow-mass-delete'], { env });
    expect(allowed.stderr).toBe('');
    expect(allowed.code).toBe(0);
    expect(allowed.stdout).not.toContain('refusing');
    for (const deleted of [
      'Connector marketing/crm',
      'NotificationChannel marketing/growth-email',
      'Pipeline marketing/crm-sync',
      'AlertRule marketing/crm-sync-failed',
      'Classification marketing/pii-phone',
      'MaskingPolicy marketing/redact-phones',
    ]) {
      expect(allowed.stdout).toMatch(new RegExp(`^- ${deleted}: deleted$`, 'm'));
    }
    expect(allowed.stdout).toContain('Apply complete: 6 done, 0 failed, 0 skipped, 0 not supported.');
    expect(await marketingNames()).toEqual([]);
    expect((await client.projects.listAll()).map((p) => p.name).sort()).toEqual(['analytics', 'marketing']);
    expect(await names(client, 'classification', analytics)).toEqual(['by-hand', 'payment-card', 'pii-email']);
    expect((await runDpctl(['plan', dir, '--prune'], { env })).code).toBe(0);
  });
});

describe('apply exits 1 when the service refuses part of the config; the rest is applied', () => {
  let t: TestTenant;
  let client: DataPlatformClient;
  let ops: string;
  let env: Record<string, string>;
  const user = `apiVersion: dataplatform/v1
kind: User
metadata:
  name: new-analyst@example.com
spec:
  name: New Analyst
  role: read-only
`;
  const dir = configDir('ops', { 'resources.yaml': projectResources('ops'), 'users.yaml': user });

  beforeAll(async () => {
    t = await svc.tenant();
    client = clientFor(svc, t);
    ops = (await client.projects.create({ name: 'ops' })).id;
    const admin = (await client.apiKeys(ops).create({ name: 'ops-admin', permission_level: 'admin' })).key!;
    env = {
      ...NO_DATAPLATFORM_ENV,
      WAREHOUSE_DB_PASSWORD: 'warehouse-pw-2',
      DATAPLATFORM_URL: `https://${t.slug}.localhost:${svc.port}`,
      DATAPLATFORM_API_KEY: admin,
      DATAPLATFORM_CA_FILE: svc.service.tls.certPath,
    };
  });
  afterAll(async () => {
    await client?.close();
  });

  test('a User document with a project API key (even admin level): 403 for the user, the project resources created', async () => {
    const r = await runDpctl(['apply', dir, '--allow-undeclared-projects'], { env });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('Plan: 3 to create, 0 to update, 0 to replace, 0 to delete, 0 unchanged.');
    expect(r.stdout).toMatch(
      /^x User new-analyst@example\.com: failed: API keys are limited to their project; creating users needs a user token \(HTTP 403 forbidden on POST \/users, request id req_[\w-]+\)$/m,
    );
    expect(r.stdout).toMatch(/^\+ Connector ops\/warehouse-db: created \(con_/m);
    expect(r.stdout).toMatch(/^\+ NotificationChannel ops\/team-email: created \(chn_/m);
    expect(r.stdout).toContain('Apply incomplete: 2 done, 1 failed, 0 skipped, 0 not supported.');
    expect(await names(client, 'connector', ops)).toEqual(['warehouse-db']);
    expect(await names(client, 'notification_channel', ops)).toEqual(['team-email']);
    expect((await client.users.listAll()).map((u) => u.email)).toEqual([t.adminEmail]);

    // A re-run tries only what is missing, and still does not converge.
    const json = await runDpctl(['apply', dir, '--allow-undeclared-projects', '--output', 'json'], { env });
    expect(json.code).toBe(1);
    const out = JSON.parse(json.stdout);
    expect(out).toMatchObject({ converged: false, summary: { create: 1, update: 0, delete: 0, no_op: 2 }, errors: [] });
    expect(out.results).toEqual([
      {
        action: 'create',
        kind: 'user',
        project: null,
        name: 'new-analyst@example.com',
        status: 'failed',
        id: null,
        message: expect.stringContaining('API keys are limited to their project; creating users needs a user token (HTTP 403 forbidden'),
      },
    ]);
  });

  test('apply --prune whose delete the service refuses (409: a hand-made alert rule uses the channel): exit 1, the update beside it applied', async () => {
    rmSync(join(dir, 'users.yaml'));
    const channel = (await client.resources('notification_channel', { projectId: ops }).listAll())[0];
    await client.resources('alert_rule', { projectId: ops }).create({
      name: 'by-hand',
      severity: 'info',
      condition: { metric: 'run_failed', operator: 'gte', threshold: 1 },
      channel_ids: [channel.id],
    });
    writeFileSync(join(dir, 'resources.yaml'), projectResources('ops', '30 * * * *').replace(/---\n[\s\S]*$/, ''));

    const r = await runDpctl(['apply', dir, '--allow-undeclared-projects', '--prune'], { env });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('Plan: 0 to create, 1 to update, 0 to replace, 1 to delete, 0 unchanged.');
    expect(r.stdout).toMatch(/^~ Connector ops\/warehouse-db: updated \(schedule\)$/m);
    expect(r.stdout).toMatch(
      /^x NotificationChannel ops\/team-email: failed: Notification channel "team-email" is used by alert rule "by-hand" \(channel_ids\[0\]\); change or delete that first \(HTTP 409 conflict on DELETE \/projects\/\{id\}\/notification-channels\/\{resourceId\}, request id req_[\w-]+\)$/m,
    );
    expect(r.stdout).toContain('Apply incomplete: 1 done, 1 failed, 0 skipped, 0 not supported.');
    expect((await client.resources('connector', { projectId: ops }).listAll())[0].schedule).toBe('30 * * * *');
    expect(await names(client, 'notification_channel', ops)).toEqual(['team-email']);
    expect(await names(client, 'alert_rule', ops)).toEqual(['by-hand']);
  });
});

describe('--allow-undeclared-projects naming a project that is not on the server', () => {
  // --allow-undeclared-projects lets metadata.project name a project that exists on the server; one that does not is a plan error.
  test('a source id that cannot be a label value: plan, apply and drift exit 1 saying why, and nothing is written', async () => {
    const t = await svc.tenant();
    const env = envFor(t);
    // A valid source id would create this project.
    const dir = configDir('unlabelled', { 'project.yaml': 'apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: unlabelled\n' });
    const runs = await Promise.all([
      runDpctl(['plan', dir, '--source-id', ''], { env }),
      runDpctl(['apply', dir, '--auto-approve', '--source-id', ''], { env }),
      runDpctl(['drift', dir, '--source-id', ' platform'], { env }),
      runDpctl(['apply', dir, '--auto-approve', '--source-id', 'x'.repeat(257)], { env }),
    ]);
    expect(runs.map((r) => [r.code, r.stderr.trim()])).toEqual([
      [1, 'dpctl: the source id is empty: pass --source-id <id>'],
      [1, 'dpctl: the source id is empty: pass --source-id <id>'],
      [1, 'dpctl: the source id " platform" has spaces around it or control characters'],
      [1, 'dpctl: the source id is 257 characters long; a label value holds at most 256'],
    ]);
    expect(await clientFor(svc, t).projects.listAll()).toEqual([]);
  });

  test("--prune does not delete another repository's project through a shared default source id (two platform/ directories)", async () => {
    const t = await svc.tenant();
    const env = envFor(t);
    const project = (name: string) => `apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: ${name}\n`;
    const teamA = configDir('platform', { 'project.yaml': project('team-a') });
    const teamB = configDir('platform', { 'project.yaml': project('team-b') });
    expect((await runDpctl(['apply', teamA, '--auto-approve'], { env })).code).toBe(0);
    // Both directories are named platform: team B's plan sees team A's project as its own, left out of its config.
    const refusal = `error: refusing to prune project "team-a" with the source id "platform" taken from the config directory's name`;
    const plan = await runDpctl(['plan', teamB, '--prune'], { env });
    expect(plan.code).toBe(1);
    expect(plan.stdout).toContain(refusal);
    const apply = await runDpctl(['apply', teamB, '--prune', '--auto-approve'], { env });
    expect(apply.code).toBe(1);
    expect(apply.stdout).toContain(refusal);
    expect((await clientFor(svc, t).projects.listAll()).map((p) => p.name)).toEqual(['team-a']);
    // Named, the id is the user's statement: its own project, once it leaves the config, is pruned.
    rmSync(join(teamA, 'project.yaml'));
    writeFileSync(join(teamA, 'other.yaml'), project('team-a2'));
    const named = await runDpctl(['plan', teamA, '--prune', '--source-id', 'platform'], { env });
    expect(named.code).toBe(2);
    expect(named.stdout).toMatch(/^ {2}- Project team-a \(prj_[^)]+\): delete$/m);
    expect(named.stdout).not.toContain('refusing');
  });

  test('plan and apply exit 1 naming the missing project, before anything is sent', async () => {
    const t = await svc.tenant();
    const env = envFor(t);
    const dir = configDir('ghosty', {
      'pii.yaml': `apiVersion: dataplatform/v1
kind: Classification
metadata:
  name: pii
  project: ghost
spec:
  sensitivity: confidential
`,
    });
    const [plan, apply] = await Promise.all([
      runDpctl(['plan', dir, '--allow-undeclared-projects'], { env }),
      runDpctl(['apply', dir, '--allow-undeclared-projects'], { env }),
    ]);
    expect(apply.code).toBe(1);
    expect(apply.stdout + apply.stderr).not.toContain('pass { projectId }');
    expect(plan.code).toBe(1);
    for (const r of [plan, apply]) {
      expect(r.stdout + r.stderr).toContain(
        'pii.yaml:1:1: Classification/pii: metadata.project: no project "ghost" on the server and no Project document declares it (projects this credential sees: none)',
      );
    }
  });
});
