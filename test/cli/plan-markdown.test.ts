import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runDpctl } from '../support/cli.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { cliEnvFor, copyExample, edit, SECRET_ENV } from '../integration/engine/helpers.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => {
  await svc?.close();
});

describe('dpctl plan --output markdown (the built binary, as a CI job runs it)', () => {
  let t: TestTenant;
  let env: Record<string, string>;
  const dir = copyExample();
  beforeAll(async () => {
    t = await svc.tenant();
    env = cliEnvFor(svc, t);
  });

  test('an empty tenant: the headline, a table per project, a collapsed diff per resource, no secret values (exit 2)', async () => {
    const r = await runDpctl(['plan', dir, '--output', 'markdown'], { env });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(2);
    expect(r.stdout).toMatch(
      /^### dpctl plan\n\n\*\*Plan:\*\* 25 to create, 0 to update, 0 to replace, 0 to delete, 0 unchanged · source <code>platform<\/code>\n/,
    );
    expect(r.stdout).toContain('#### Project <code>analytics</code>\n\n| Action | Kind | Name |\n|---|---|---|\n');
    expect(r.stdout).toContain('| ➕ create | Connector | <code>orders-db</code> |');
    expect(r.stdout.match(/<details><summary>➕ create /g)).toHaveLength(25);
    expect(r.stdout).toContain('"password":"(sensitive)"');
    for (const secret of Object.values(SECRET_ENV)) expect(r.stdout).not.toContain(secret);
  });

  test('after apply: one edit is one update row and its diff; then no changes (exit 0)', async () => {
    expect((await runDpctl(['apply', dir], { env })).code).toBe(0);
    edit(dir, 'analytics/transform.yaml', 'schedule: "0 2 * * *"', 'schedule: "0 4 * * *"');
    const r = await runDpctl(['plan', dir, '--output', 'markdown'], { env });
    expect(r.code).toBe(2);
    expect(r.stdout).toContain('**Plan:** 0 to create, 1 to update, 0 to replace, 0 to delete, 24 unchanged');
    expect(r.stdout).toContain('| ✏️ update | Pipeline | <code>nightly-revenue</code> |');
    expect(r.stdout).toContain(
      '<details><summary>✏️ update Pipeline <code>analytics/nightly-revenue</code></summary>\n\n```diff\n- schedule = "0 2 * * *"\n+ schedule = "0 4 * * *"\n```\n\n</details>\n',
    );
    edit(dir, 'analytics/transform.yaml', 'schedule: "0 4 * * *"', 'schedule: "0 2 * * *"');
    const none = await runDpctl(['plan', dir, '--output', 'markdown'], { env });
    expect(none.code).toBe(0);
    // No changes, and the health the plan observed: the example's connectors have not synced yet.
    expect(none.stdout).toBe(
      [
        '### dpctl plan',
        '',
        '**No changes.** 25 resources in sync · source <code>platform</code>',
        '',
        '#### Health (as observed): 3 never run (untested)',
        '',
        '- ❔ Connector analytics/orders-db: never run (untested)',
        '- ❔ Connector analytics/billing-db: never run (untested)',
        '- ❔ Connector marketing/crm: never run (untested)',
        '',
        '_never run: nothing has shown yet that they work; `dpctl apply --test-connections` tests the connection now, the first run does anyway._',
        '',
      ].join('\n'),
    );
    // drift --output markdown: no drift, and the same health section as its text.
    const drift = await runDpctl(['drift', dir, '--output', 'markdown'], { env });
    expect(drift.code).toBe(0);
    expect(drift.stdout).toMatch(/^### dpctl drift\n\n\*\*No drift\.\*\* The platform matches the config\./);
    expect(drift.stdout).toContain(
      '\n#### Health (as observed): 3 never run (untested)\n\n- ❔ Connector analytics/orders-db: never run (untested)\n',
    );
  });

  test('an invalid config: the errors as markdown on stdout as well as on stderr (exit 1)', async () => {
    const bad = copyExample();
    edit(bad, 'analytics/sources.yaml', 'port: 5432', 'port: "x"');
    const r = await runDpctl(['plan', bad, '--output', 'markdown'], { env });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('spec.config.port: must be integer');
    expect(r.stdout).toMatch(
      /^### dpctl plan\n\n> \[!CAUTION\]\n> \*\*1 error: nothing can be applied until it is fixed\.\*\*\n>\n> - \S*analytics\/sources\.yaml:\d+:\d+: .*spec\.config\.port: must be integer\n/,
    );
    expect(r.stdout).toContain('**Invalid configuration:** nothing was planned.');
  });
});
