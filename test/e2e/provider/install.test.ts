import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildRelease } from '../../../src/distribution/provider-release.js';
import { runDpctl } from '../../support/cli.js';
import { testStore } from '../../support/service.js';
import { assertFreshBundle, haveTerraform, PROVIDER_BLOCK, writeCliConfig } from './harness.js';

/**
 * `dpctl provider install` as users run it (the built CLI, bin/dpctl.js), then `terraform init`
 * finding the provider where it was put: a mirror named by a CLI config, or ~/.terraform.d/plugins
 * with no CLI config at all. Then Terraform starts it (`providers schema`), so the launcher works.
 */
describe.skipIf(testStore() === 'postgres' || !haveTerraform)('dpctl provider install + terraform init (real CLI, real terraform)', () => {
  const roots: string[] = [];
  const PLATFORM = `${process.platform === 'darwin' ? 'darwin' : 'linux'}_${process.arch === 'arm64' ? 'arm64' : 'amd64'}`;
  const PACKAGE_DIR = join('registry.terraform.io', 'dataplatform', 'dataplatform');
  const ZIP = join(PACKAGE_DIR, `terraform-provider-dataplatform_0.1.0_${PLATFORM}.zip`);

  afterAll(() => {
    for (const r of roots) rmSync(r, { recursive: true, force: true });
  });

  /** A temporary HOME and a working directory with the provider block; nothing else of the caller's environment but PATH. */
  const setup = () => {
    assertFreshBundle();
    const root = mkdtempSync(join(tmpdir(), 'dp-install-'));
    roots.push(root);
    const home = join(root, 'home');
    const work = join(root, 'work');
    mkdirSync(home);
    mkdirSync(work);
    writeFileSync(join(work, 'main.tf'), PROVIDER_BLOCK);
    return {
      root,
      home,
      work,
      env: { PATH: process.env.PATH, HOME: home, CHECKPOINT_DISABLE: '1', TF_IN_AUTOMATION: '1' } as NodeJS.ProcessEnv,
    };
  };

  const terraform = (args: string[], cwd: string, env: NodeJS.ProcessEnv) =>
    new Promise<{ code: number; out: string }>((resolve) =>
      execFile('terraform', args, { cwd, env, maxBuffer: 64 << 20 }, (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, out: `${stdout}\n${stderr}` }),
      ),
    );

  /** init, then a command that starts the provider: its schema has the resources. */
  const initAndStart = async (work: string, env: NodeJS.ProcessEnv) => {
    const init = await terraform(['init', '-no-color', '-input=false'], work, env);
    expect(init.code, init.out).toBe(0);
    expect(init.out).toContain('Installing dataplatform/dataplatform v0.1.0...');
    expect(init.out).toContain('Terraform has been successfully initialized!');
    expect(readFileSync(join(work, '.terraform.lock.hcl'), 'utf8')).toContain('provider "registry.terraform.io/dataplatform/dataplatform"');
    const schema = await terraform(['providers', 'schema', '-json'], work, env);
    expect(schema.code, schema.out).toBe(0);
    const parsed = JSON.parse(schema.out.slice(0, schema.out.lastIndexOf('}') + 1));
    expect(Object.keys(parsed.provider_schemas['registry.terraform.io/dataplatform/dataplatform'].resource_schemas)).toContain(
      'dataplatform_project',
    );
  };

  it(
    '--dir <mirror>: installs the zips there (packed layout), terraform init finds one through a CLI config, providers lock -fs-mirror records every platform',
    { timeout: 90_000 },
    async () => {
      const { root, home, work, env } = setup();
      const mirror = join(root, 'mirror');
      const res = await runDpctl(['provider', 'install', '--dir', mirror], { env: { HOME: home } });
      expect(res.code, res.stderr).toBe(0);
      expect(res.stdout).toContain(
        'installed registry.terraform.io/dataplatform/dataplatform 0.1.0 (darwin_amd64, darwin_arm64, linux_amd64, linux_arm64)\n',
      );
      expect(res.stdout).toContain(`  ${join(mirror, ZIP)}\n`);
      expect(readdirSync(join(mirror, PACKAGE_DIR)).sort()).toEqual(
        ['darwin_amd64', 'darwin_arm64', 'linux_amd64', 'linux_arm64'].map((p) => `terraform-provider-dataplatform_0.1.0_${p}.zip`),
      );
      // Nothing went to the default place.
      expect(existsSync(join(home, '.terraform.d'))).toBe(false);
      const tfEnv = { ...env, TF_CLI_CONFIG_FILE: writeCliConfig(join(root, 'cli.tfrc'), mirror) };
      await initAndStart(work, tfEnv);
      // The h1 hash Terraform computed from the zip is the one the release states.
      const { archives } = await buildRelease();
      expect(readFileSync(join(work, '.terraform.lock.hcl'), 'utf8')).toContain(`"${archives.get(PLATFORM)!.h1}"`);
      // A team on several platforms: the lock file gets every platform's hash from the mirror.
      rmSync(join(work, '.terraform.lock.hcl'));
      const lock = await terraform(
        ['providers', 'lock', '-no-color', `-fs-mirror=${mirror}`, '-platform=linux_amd64', '-platform=darwin_arm64'],
        work,
        tfEnv,
      );
      expect(lock.code, lock.out).toBe(0);
      expect(readFileSync(join(work, '.terraform.lock.hcl'), 'utf8')).toContain(archives.get('darwin_arm64')!.h1);
    },
  );

  it(
    'without --dir: installs into $HOME/.terraform.d/plugins, which terraform init searches with no CLI config',
    { timeout: 60_000 },
    async () => {
      const { work, home, env } = setup();
      const res = await runDpctl(['provider', 'install'], { env: { HOME: home } });
      expect(res.code, res.stderr).toBe(0);
      const zip = join(home, '.terraform.d', 'plugins', ZIP);
      expect(res.stdout).toContain(`  ${zip}\n`);
      expect(statSync(zip).size).toBeGreaterThan(100_000);
      // No TF_CLI_CONFIG_FILE and no ~/.terraformrc: Terraform's implied local mirror only.
      expect(env.TF_CLI_CONFIG_FILE).toBeUndefined();
      expect(existsSync(join(home, '.terraformrc'))).toBe(false);
      await initAndStart(work, env);
    },
  );
});
