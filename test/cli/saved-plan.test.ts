import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DPCTL, runDpctl } from '../support/cli.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { cliEnvFor } from '../integration/engine/helpers.js';

/**
 * Saved plans (plan --out, apply FILE), --target, and the confirmation on a terminal: the
 * built binary against a real service over HTTPS.
 */
let svc: TestService;
let t: TestTenant;
let env: Record<string, string>;
beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  env = { ...cliEnvFor(svc, t), SAVED_PLAN_DB_PASSWORD: 'db-secret-value-1' };
});
afterAll(() => svc?.close());

const project = (p: string) => `apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: ${p}\nspec:\n  description: saved plans\n`;
const connector = (p: string, name: string, schedule = '0 * * * *') =>
  `apiVersion: dataplatform/v1\nkind: Connector\nmetadata:\n  name: ${name}\n  project: ${p}\nspec:\n  connector_type: postgresql\n  config:\n    host: db.internal\n    port: 5432\n    database: shop\n  credentials:\n    username: loader\n    password:\n      secretRef:\n        env: SAVED_PLAN_DB_PASSWORD\n  schedule: "${schedule}"\n`;

function config(name: string, docs: string[]): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'dp-saved-')), name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'platform.yaml'), docs.join('---\n'));
  return dir;
}

async function connectorNamed(p: string, name: string): Promise<Record<string, any> | undefined> {
  const proj = (await svc.ok(t, 'GET', '/projects', { query: { limit: 100 } })).data.find((x: { name: string }) => x.name === p);
  if (!proj) return undefined;
  return (await svc.ok(t, 'GET', `/projects/${proj.id}/connectors`, { query: { limit: 100 } })).data.find(
    (x: { name: string }) => x.name === name,
  );
}

describe('saved plans', () => {
  test('plan --out saves the plan without secret values (mode 600); apply FILE applies exactly it', async () => {
    const dir = config('saved-ok', [project('saved-ok'), connector('saved-ok', 'orders')]);
    const file = join(dir, '..', 'tfplan.json');
    const plan = await runDpctl(['plan', dir, '--out', file], { env });
    expect(plan.code).toBe(2);
    expect(plan.stderr).toContain(`saved the plan to ${file}: apply it with dpctl apply ${file}`);
    const text = readFileSync(file, 'utf8');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(text).not.toContain('db-secret-value-1');
    const saved = JSON.parse(text);
    expect(saved).toMatchObject({ format: 'dpctl-plan/v1', config_path: dir, options: { source_id: 'saved-ok', targets: [] } });
    expect(saved.fingerprints.map((f: { subject: string; action: string }) => `${f.action} ${f.subject}`)).toEqual([
      'create Project saved-ok',
      'create Connector saved-ok/orders',
    ]);
    const apply = await runDpctl(['apply', file], { env });
    expect(apply.code, apply.stderr).toBe(0);
    expect(apply.stderr).toContain(`applying the plan saved in ${file}`);
    expect(await connectorNamed('saved-ok', 'orders')).toMatchObject({ schedule: '0 * * * *' });
    // Applied: the same file is now stale (the connector exists).
    const again = await runDpctl(['apply', file], { env });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(
      'dpctl: nothing applied: the saved plan is stale, plan again:\n  Project saved-ok: now exists on the platform\n  Connector saved-ok/orders: now exists on the platform\n',
    );
  });

  test('a configuration changed since the plan, a secret value changed, or a resource changed by hand: refused, nothing applied', async () => {
    const dir = config('saved-stale', [project('saved-stale'), connector('saved-stale', 'orders')]);
    expect((await runDpctl(['apply', dir], { env })).code).toBe(0);
    const file = join(dir, '..', 'plan.json');
    writeFileSync(join(dir, 'platform.yaml'), [project('saved-stale'), connector('saved-stale', 'orders', '5 * * * *')].join('---\n'));
    expect((await runDpctl(['plan', dir, '--out', file], { env })).code).toBe(2);

    writeFileSync(join(dir, 'platform.yaml'), [project('saved-stale'), connector('saved-stale', 'orders', '10 * * * *')].join('---\n'));
    const changed = await runDpctl(['apply', file], { env });
    expect(changed.code).toBe(1);
    expect(changed.stderr).toContain('  Connector saved-stale/orders: the configuration changed');
    expect((await connectorNamed('saved-stale', 'orders'))!.schedule).toBe('0 * * * *');

    writeFileSync(join(dir, 'platform.yaml'), [project('saved-stale'), connector('saved-stale', 'orders', '5 * * * *')].join('---\n'));
    const secret = await runDpctl(['apply', file], { env: { ...env, SAVED_PLAN_DB_PASSWORD: 'another' } });
    expect(secret.code).toBe(1);
    expect(secret.stderr).toContain('  Connector saved-stale/orders: the configuration changed');

    const live = (await connectorNamed('saved-stale', 'orders'))!;
    await svc.ok(t, 'PATCH', `/projects/${live.project_id}/connectors/${live.id}`, { body: { selected_tables: ['public.by_hand'] } });
    const byHand = await runDpctl(['apply', file], { env });
    expect(byHand.code).toBe(1);
    expect(byHand.stderr).toContain('  Connector saved-stale/orders: changed on the platform');
    expect((await connectorNamed('saved-stale', 'orders'))!.schedule).toBe('0 * * * *');
  });
  test('with DPCTL_FINGERPRINT_KEY the file holds keyed secret fingerprints: applied with the same key, refused with another', async () => {
    const dir = config('saved-keyed', [project('saved-keyed'), connector('saved-keyed', 'orders')]);
    const [keyed, unkeyed] = [join(dir, '..', 'keyed.json'), join(dir, '..', 'unkeyed.json')];
    const key = (k: string) => ({ ...env, DPCTL_FINGERPRINT_KEY: k });
    expect((await runDpctl(['plan', dir, '--out', keyed], { env: key('team-key') })).code).toBe(2);
    expect((await runDpctl(['plan', dir, '--out', unkeyed], { env })).code).toBe(2);
    const shaOf = (file: string) =>
      JSON.parse(readFileSync(file, 'utf8')).fingerprints.find((f: { subject: string }) => f.subject === 'Connector saved-keyed/orders')
        .config_sha;
    // Unkeyed, the secret's part is its SHA-256, which a reader of the file can test guesses against.
    expect(shaOf(keyed)).not.toBe(shaOf(unkeyed));
    const other = await runDpctl(['apply', keyed], { env: key('another-key') });
    expect(other.code).toBe(1);
    expect(other.stderr).toContain('  Connector saved-keyed/orders: the configuration changed');
    const same = await runDpctl(['apply', keyed], { env: key('team-key') });
    expect(same.code, same.stderr).toBe(0);
    expect(await connectorNamed('saved-keyed', 'orders')).toBeDefined();
  });
});

describe('--target', () => {
  test('plans and applies the targeted resource and what it needs, nothing else', async () => {
    const dir = config('targets', [project('targets'), connector('targets', 'a'), connector('targets', 'b')]);
    const plan = await runDpctl(['plan', dir, '--target', 'Connector/targets/a', '--output', 'json'], { env });
    expect(plan.code).toBe(2);
    const json = JSON.parse(plan.stdout);
    expect(json.changes.map((c: { action: string; name: string }) => `${c.action} ${c.name}`)).toEqual(['create targets', 'create a']);
    expect(json.warnings).toContain(
      'planned for Connector/targets/a only (--target): the rest of the configuration may differ from the platform',
    );
    expect((await runDpctl(['apply', dir, '--target', 'connector/targets/a'], { env })).code).toBe(0);
    expect(await connectorNamed('targets', 'a')).toBeDefined();
    expect(await connectorNamed('targets', 'b')).toBeUndefined();
  });

  test('a target that matches nothing, or is not an address, is an error', async () => {
    const dir = config('targets-bad', [project('targets-bad'), connector('targets-bad', 'a')]);
    const none = await runDpctl(['plan', dir, '--target', 'Connector/targets-bad/zzz'], { env });
    expect(none.code).toBe(1);
    expect(none.stdout).toContain('error: --target Connector/targets-bad/zzz: no such resource in the configuration');
    const bad = await runDpctl(['plan', dir, '--target', 'Connector/zzz'], { env });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--target "Connector/zzz": a Connector is named Kind/project/name');
  });
});

/** Runs dpctl under `script`, so stdin and stdout are a terminal; `answer` is typed in. */
function onTerminal(args: string[], answer: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const command = [process.execPath, DPCTL, ...args].map((a) => `'${a}'`).join(' ');
    const child = spawn('script', ['-qec', command, '/dev/null'], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('Only "yes" is accepted')) child.stdin.end(`${answer}\n`);
    });
    child.stderr.on('data', (d) => (out += d));
    child.once('close', (code) => resolve({ code, out }));
  });
}

describe('confirmation on a terminal', () => {
  test('apply asks; anything but "yes" cancels and changes nothing; "yes" applies; --auto-approve does not ask', async () => {
    const dir = config('confirm', [project('confirm'), connector('confirm', 'orders')]);
    const no = await onTerminal(['apply', dir], 'no');
    expect(no.out).toContain('Apply these changes? Only "yes" is accepted:');
    expect(no.out).toContain('dpctl: apply cancelled');
    expect(no.code).toBe(1);
    expect(await connectorNamed('confirm', 'orders')).toBeUndefined();
    const yes = await onTerminal(['apply', dir], 'yes');
    expect(yes.code, yes.out).toBe(0);
    expect(await connectorNamed('confirm', 'orders')).toBeDefined();
    writeFileSync(join(dir, 'platform.yaml'), [project('confirm'), connector('confirm', 'orders', '7 * * * *')].join('---\n'));
    const auto = await onTerminal(['apply', dir, '--auto-approve'], 'no');
    expect(auto.code, auto.out).toBe(0);
    expect(auto.out).not.toContain('Only "yes"');
    expect((await connectorNamed('confirm', 'orders'))!.schedule).toBe('7 * * * *');
  });
});
