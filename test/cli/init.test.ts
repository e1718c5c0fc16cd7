import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { INIT_FORMATS, scaffold, type InitFormat, type ScaffoldOptions } from '../../src/cli/init/templates.js';
import { loadConfig } from '../../src/config/index.js';
import { runDpctl } from '../support/cli.js';

/**
 * `dpctl init` as a user runs it (the built CLI). The full path of each format (install from the
 * tarball, validate, apply, cdktf deploy, terraform apply) is test/e2e/package/from-package.test.ts;
 * here: what it writes, what it refuses, and the example platform being valid.
 */
/** What `dpctl init` passes the templates, for a repository named `r`. */
const scaffoldOptions = (format: InitFormat): ScaffoldOptions => ({
  format,
  packageName: 'dataplatform-as-code',
  packageSpec: '^1.0.0',
  providerVersion: '1.0.0',
  repoName: 'r',
  sourceId: 'r',
});

describe('dpctl init', () => {
  const roots: string[] = [];
  const fresh = () => {
    const dir = mkdtempSync(join(tmpdir(), 'dp-init-'));
    roots.push(dir);
    return dir;
  };
  afterAll(() => {
    for (const r of roots) rmSync(r, { recursive: true, force: true });
  });

  it('writes the yaml repository into an empty directory, and its platform is valid', async () => {
    const dir = join(fresh(), 'team-config');
    const r = await runDpctl(['init', dir]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`wrote a yaml configuration repository in ${dir}`);
    for (const f of [
      '.gitignore',
      'README.md',
      '.github/workflows/platform.yml',
      'package.json',
      'platform/projects.yaml',
      'platform/starter/sources.yaml',
      'platform/starter/warehouse.yaml',
      '.vscode/settings.json',
    ]) {
      expect(r.stdout).toContain(`  ${f}\n`);
    }
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    expect(pkg).toMatchObject({
      name: 'team-config',
      private: true,
      dependencies: { 'dataplatform-as-code': '^0.1.0' },
      // Its own source id: every init'd repository's config directory is `platform`, the default id.
      scripts: {
        validate: 'dpctl validate platform',
        plan: 'dpctl plan platform --source-id team-config',
        apply: 'dpctl apply platform --source-id team-config',
      },
    });
    expect(r.stdout).toContain('npm run plan   # dpctl plan platform --source-id team-config');
    expect(r.stdout).toContain(`next:\n  cd ${dir}\n  npm install\n`);
    expect(r.stderr).toBe('');
    // The install scripts npm asks about (npm 11.16+), decided as this package decides them.
    const own = JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', 'package.json'), 'utf8'));
    expect(pkg.allowScripts).toEqual(own.allowScripts);
    expect(pkg.allowScripts).toMatchObject({ 'better-sqlite3': true });
    const readme = readFileSync(join(dir, 'README.md'), 'utf8');
    expect(readme).toContain('`POST /api/v1/projects/<project id>/api-keys`');
    expect(readme).toContain('points at `orders.db.internal`, a host that does not exist');
    expect(readme).not.toContain('npmjs.com');
    expect(readFileSync(join(dir, 'platform/starter/sources.yaml'), 'utf8')).toContain('host: orders.db.internal      # a placeholder');
    const { config, errors } = loadConfig([join(dir, 'platform')]);
    expect(errors).toEqual([]);
    expect(config.documents.map((d) => d.yamlKind).sort()).toEqual([
      'AlertRule',
      'Connector',
      'InfrastructureResource',
      'NotificationChannel',
      'Project',
    ]);
    const workflow = readFileSync(join(dir, '.github/workflows/platform.yml'), 'utf8');
    expect(workflow).toContain('npx dpctl plan platform --source-id team-config --output markdown > plan.md; code=$?');
    // A wrong host or password fails the job, not only the first sync after it.
    expect(workflow).toContain('npx dpctl apply platform --source-id team-config --test-connections');
    expect(workflow).toContain('DATAPLATFORM_API_KEY (an admin key of');
    expect(workflow).toContain('DPCTL_FINGERPRINT_KEY: ${{ secrets.DPCTL_FINGERPRINT_KEY }}');
    expect(readFileSync(join(dir, 'README.md'), 'utf8')).toContain('--source-id team-config');
    expect(workflow).toContain('gh pr comment');
    expect(readFileSync(join(dir, '.gitignore'), 'utf8')).toMatch(/^\*\.tfstate$/m);
    expect(readFileSync(join(dir, '.gitignore'), 'utf8')).toMatch(/^\*\.secret$/m);
  });

  it("hcl's network mirror is reached as localhost: Terraform does not resolve demo.localhost", () => {
    const tfrc = scaffold(scaffoldOptions('hcl')).get('network-mirror.tfrc')!;
    expect(tfrc).toContain('url     = "https://localhost:8443/terraform/providers/"');
    expect(tfrc).not.toMatch(/url .*demo\.localhost/);
  });

  it('counts what git init and npm install leave as empty, and merges package.json keeping its dependency spec', async () => {
    const dir = fresh();
    mkdirSync(join(dir, '.git'));
    mkdirSync(join(dir, 'node_modules'));
    writeFileSync(join(dir, 'package-lock.json'), '{}');
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({
        name: 'ours',
        scripts: { test: 'true' },
        dependencies: { 'dataplatform-as-code': 'file:../x.tgz' },
        allowScripts: { esbuild: false },
      }),
    );
    // Run in the directory itself, as `dpctl init .`: no `cd` in what to do next.
    const r = await runDpctl(['init', '.', '--format', 'cdktf'], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('next:\n  npm install\n');
    // What `npm install ../x.tgz` recorded installs here, not in a CI checkout of the repository.
    expect(r.stderr).toBe(
      'warning: package.json installs dataplatform-as-code from file:../x.tgz, outside this repository: a CI checkout of it cannot install that. ' +
        "Change that dependency to what CI can fetch (a git or https URL of the package, your registry's version, or " +
        'file:vendor/<tarball> with the tarball committed); init --package-spec sets it\n',
    );
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    expect(pkg.name).toBe('ours');
    expect(pkg.type).toBe('module');
    expect(pkg.scripts).toMatchObject({ test: 'true', deploy: 'cdktf deploy platform --auto-approve --skip-provider-lock' });
    expect(pkg.dependencies).toMatchObject({
      'dataplatform-as-code': 'file:../x.tgz',
      cdktf: expect.any(String),
      constructs: expect.any(String),
    });
    expect(readFileSync(join(dir, 'main.ts'), 'utf8')).toContain("from 'dataplatform-as-code/cdktf'");
    // The user's own decisions stand.
    expect(pkg.allowScripts).toMatchObject({ esbuild: false, 'better-sqlite3': true });
  });

  it('a file: dependency inside the repository (a committed tarball) is not warned about', async () => {
    const dir = fresh();
    const r = await runDpctl(['init', dir, '--package-spec', 'file:vendor/dataplatform-as-code-0.1.0.tgz']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    expect(JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).dependencies).toEqual({
      'dataplatform-as-code': 'file:vendor/dataplatform-as-code-0.1.0.tgz',
    });
  });

  it('refuses a non-empty directory, naming what it would overwrite; --force writes and says what it overwrote', async () => {
    const dir = fresh();
    writeFileSync(join(dir, 'main.tf'), '# mine\n');
    writeFileSync(join(dir, 'notes.txt'), 'mine\n');
    const refused = await runDpctl(['init', dir, '--format', 'hcl']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(`dpctl: ${dir} is not empty (it would overwrite main.tf); use --force to write there anyway\n`);
    expect(readFileSync(join(dir, 'main.tf'), 'utf8')).toBe('# mine\n');
    const other = fresh();
    writeFileSync(join(other, 'notes.txt'), 'mine\n');
    expect((await runDpctl(['init', other])).stderr).toContain('is not empty (it holds notes.txt)');
    const forced = await runDpctl(['init', dir, '--format', 'hcl', '--force']);
    expect(forced.code, forced.stderr).toBe(0);
    expect(forced.stdout).toContain('  main.tf (overwritten)\n');
    expect(readFileSync(join(dir, 'main.tf'), 'utf8')).toContain('source  = "dataplatform/dataplatform"');
    expect(readFileSync(join(dir, 'notes.txt'), 'utf8')).toBe('mine\n');
  });

  it("--source-id names the repository's ownership label; one that is not a label value is refused", async () => {
    const dir = join(fresh(), 'x');
    const r = await runDpctl(['init', dir, '--source-id', 'acme-data']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).scripts.apply).toBe('dpctl apply platform --source-id acme-data');
    const bad = await runDpctl(['init', join(fresh(), 'y'), '--source-id', 'no spaces']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('the source id "no spaces" is not a label value');
  });

  /**
   * The Plan step's script, run by bash with stand-ins for the commands it calls: the exit status it
   * records must be the plan's. The hcl workflow recorded the last `echo`'s (always 0), so its
   * "Fail on plan errors" step never failed.
   */
  it.each(INIT_FORMATS)("%s: the workflow records the plan command's exit status, and trusts DATAPLATFORM_CA_PEM", (format) => {
    const workflow = scaffold(scaffoldOptions(format)).get('.github/workflows/platform.yml')!;
    const planStep = workflow.slice(workflow.indexOf('      - name: Plan'));
    const script = planStep
      .slice(planStep.indexOf('run: |') + 'run: |'.length)
      .split('\n')
      .slice(1)
      .filter((l, i, all) => all.slice(0, i + 1).every((x) => x.startsWith('          ')))
      .map((l) => l.slice(10))
      .join('\n');
    expect(script).toContain('echo "code=$code" >> "$GITHUB_OUTPUT"');
    const bin = fresh();
    // npx, npm and terraform stand-ins: the plan command exits with $PLAN_EXIT, everything else with 0.
    const standIn = (name: string, planWord: string) =>
      writeFileSync(join(bin, name), `#!/bin/sh\ncase "$*" in *"${planWord}"*) exit "$PLAN_EXIT";; esac\nexit 0\n`, { mode: 0o755 });
    standIn('npx', 'plan platform');
    standIn('npm', 'diff');
    standIn('terraform', 'plan');
    for (const exit of [0, 1, 2]) {
      const work = fresh();
      const out = join(work, 'github-output');
      const run = spawnSync('bash', ['-c', script], {
        cwd: work,
        env: { PATH: `${bin}:${process.env.PATH}`, GITHUB_OUTPUT: out, PLAN_EXIT: String(exit) },
        encoding: 'utf8',
      });
      expect(run.status, run.stderr).toBe(0);
      expect(readFileSync(out, 'utf8'), `${format} with the plan exiting ${exit}`).toBe(`code=${exit}\n`);
    }
    expect(workflow).toContain('DATAPLATFORM_CA_PEM: ${{ secrets.DATAPLATFORM_CA_PEM }}');
    expect(workflow).toContain('echo "DATAPLATFORM_CA_FILE=$RUNNER_TEMP/dataplatform-ca.pem" >> "$GITHUB_ENV"');
  });

  it('an unknown format is refused with the choices', async () => {
    const r = await runDpctl(['init', fresh(), '--format', 'pulumi']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("argument 'pulumi' is invalid. Allowed choices are yaml, cdktf, hcl.");
  });

  it('every format has the common files and its own, none written twice', () => {
    for (const format of INIT_FORMATS) {
      const files = scaffold(scaffoldOptions(format));
      expect([...files.keys()], format).toEqual(expect.arrayContaining(['.gitignore', 'README.md', '.github/workflows/platform.yml']));
      expect(files.get('README.md'), format).toContain('# r');
      // The first apply creates the project: an API key cannot (a user followed the README with one).
      expect(files.get('README.md'), format).toMatch(
        /The first (apply|deploy) must create the project `starter`.*\nrun it once as an admin/,
      );
    }
  });
});
