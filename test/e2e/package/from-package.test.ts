import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testStore } from '../../support/service.js';

/**
 * The product as a team uses it: never this checkout, only the tarball `npm pack` makes, installed
 * into a new git repository in a temporary directory outside the checkout. Nothing here imports
 * src/ or dist/: every step is a command of the installed package (`npx dpctl ...`), the real
 * cdktf CLI, real terraform and plain HTTPS against the service the package itself started.
 * (The cdktf CLI and tsx binaries come from the checkout's devDependencies: tools the team
 * installs anyway, not the product.)
 */

const ROOT = join(import.meta.dirname, '..', '..', '..');
const BIN = join(ROOT, 'node_modules', '.bin');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const dep = (name: string) =>
  (JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
const haveTerraform = await new Promise<boolean>((resolve) => execFile('terraform', ['version'], (err) => resolve(!err)));

interface Run {
  code: number | null;
  out: string;
}

/** Runs a command to completion (output read after 'close'). */
function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('close', (code) => resolve({ code, out }));
  });
}

/**
 * better-sqlite3's install downloads its prebuilt binary from GitHub, which a team's machine can
 * reach and this one cannot: here npm compiled it instead, 150 s of CPU in every CI run. Its
 * installer (prebuild-install) also takes a local prebuild, named as the release asset; this packs
 * the checkout's own binary (same version, Node ABI and platform) that way. Another version would
 * not match the name, and npm would compile it as before. Returns the directory to pass in
 * `npm_config_better_sqlite3_local_prebuilds` (prebuild-install reads it from the environment; npm
 * warns that it does not know that setting). Measured: the install took 156 s, 18 s with it.
 */
async function localSqlitePrebuild(dir: string): Promise<string> {
  mkdirSync(dir, { recursive: true });
  const asset = `better-sqlite3-v${dep('better-sqlite3')}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  const packed = await run(
    'tar',
    ['-czf', join(dir, asset), 'build/Release/better_sqlite3.node'],
    join(ROOT, 'node_modules', 'better-sqlite3'),
    process.env,
  );
  expect(packed.code, packed.out).toBe(0);
  return dir;
}

/** A long-running child whose output is kept; `waitFor` resolves when a pattern shows up. */
function start(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv) {
  const child: ChildProcess = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return {
    child,
    output: () => out,
    waitFor: (pattern: RegExp, ms = 30_000) =>
      new Promise<RegExpMatchArray>((resolve, reject) => {
        const timer = setInterval(() => {
          const m = out.match(pattern);
          if (m) {
            clearInterval(timer);
            resolve(m);
          } else if (child.exitCode !== null) {
            clearInterval(timer);
            reject(new Error(`${cmd} exited with ${child.exitCode}:\n${out}`));
          }
        }, 100);
        setTimeout(() => {
          clearInterval(timer);
          reject(new Error(`${pattern} not seen in ${ms} ms:\n${out}`));
        }, ms);
      }),
    stop: () =>
      new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : (child.once('close', () => resolve()), child.kill('SIGTERM')))),
  };
}

describe.skipIf(testStore() === 'postgres' || !haveTerraform)('from the packed package, in a team repository outside the checkout', () => {
  let work: string;
  let team: string;
  let tarball: string;
  let install: Run;
  let service: ReturnType<typeof start>;
  let port: number;
  let caFile: string;
  const children: Array<ReturnType<typeof start>> = [];
  /** Only what a shell would pass on: PATH (with node, git, terraform) and a private HOME. */
  let baseEnv: NodeJS.ProcessEnv;
  const tenantEnv = (slug: string) => ({
    ...baseEnv,
    DATAPLATFORM_URL: `https://${slug}.localhost:${port}`,
    DATAPLATFORM_EMAIL: `admin@${slug}.example`,
    DATAPLATFORM_PASSWORD: `${slug}-password-1`,
    DATAPLATFORM_CA_FILE: caFile,
  });
  const dpctl = (args: string[], cwd: string, env: NodeJS.ProcessEnv) => run(join(team, 'node_modules', '.bin', 'dpctl'), args, cwd, env);

  /** GET on the API as a tenant's admin, with nothing but node:https. */
  async function api(slug: string, path: string): Promise<any> {
    const ca = readFileSync(caFile);
    const call = (method: string, p: string, headers: Record<string, string>, body?: string) =>
      new Promise<any>((resolve, reject) => {
        const req = request(
          {
            host: '127.0.0.1',
            servername: `${slug}.localhost`,
            port,
            method,
            path: `/api/v1${p}`,
            ca,
            headers: { host: `${slug}.localhost:${port}`, ...headers },
          },
          (res) => {
            let text = '';
            res
              .on('data', (d) => (text += d))
              .on('end', () =>
                res.statusCode! < 300 ? resolve(JSON.parse(text)) : reject(new Error(`${method} ${p}: ${res.statusCode} ${text}`)),
              );
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    const login = await call(
      'POST',
      '/auth/login',
      { 'content-type': 'application/json' },
      JSON.stringify({ email: `admin@${slug}.example`, password: `${slug}-password-1` }),
    );
    return call('GET', path, { authorization: `Bearer ${login.access_token}` });
  }
  const projectNamed = async (slug: string, name: string) =>
    ((await api(slug, '/projects?limit=100')).data as Array<{ id: string; name: string }>).find((p) => p.name === name);

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'dp-team-'));
    team = join(work, 'platform-config');
    mkdirSync(join(work, 'home'));
    baseEnv = {
      PATH: `${dirname(process.execPath)}:${process.env.PATH}`,
      HOME: join(work, 'home'),
      CHECKPOINT_DISABLE: '1',
      CDKTF_DISABLE_TELEMETRY: '1',
      TF_IN_AUTOMATION: '1',
    };
    // 1. The tarball (dist/ was built by `npm test`'s pretest; --ignore-scripts: not twice).
    const pack = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], ROOT, process.env);
    expect(pack.code, pack.out).toBe(0);
    tarball = join(work, (JSON.parse(pack.out.slice(pack.out.indexOf('['))) as Array<{ filename: string }>)[0].filename);
    // 2. A new repository: git init, npm init, install the tarball with the cdktf libraries.
    mkdirSync(team);
    expect((await run('git', ['init', '-q', '-b', 'main'], team, baseEnv)).code).toBe(0);
    writeFileSync(join(team, 'package.json'), `${JSON.stringify({ name: 'platform-config', version: '1.0.0', private: true }, null, 2)}\n`);
    install = await run(
      'npm',
      [
        'install',
        '--no-audit',
        '--no-fund',
        '--prefer-offline',
        tarball,
        `cdktf@${dep('cdktf')}`,
        `cdktn@${dep('cdktn')}`,
        `constructs@${dep('constructs')}`,
      ],
      team,
      // The developer's own npm configuration and cache (HOME): the machine's registry, CA and node headers.
      { ...baseEnv, HOME: process.env.HOME, npm_config_better_sqlite3_local_prebuilds: await localSqlitePrebuild(join(work, 'prebuilds')) },
    );
    expect(install.code, install.out).toBe(0);
    // 3. The reference service, from the installed package, with a tenant per surface.
    const data = join(work, 'service');
    for (const slug of ['yaml', 'cdk', 'hcl']) {
      const created = await run(
        join(team, 'node_modules', '.bin', 'dpctl'),
        ['tenant', 'create', slug, '--admin-email', `admin@${slug}.example`, '--data-dir', data],
        team,
        {
          ...baseEnv,
          DP_ADMIN_PASSWORD: `${slug}-password-1`,
        },
      );
      expect(created.code, created.out).toBe(0);
    }
    service = start(join(team, 'node_modules', '.bin', 'dpctl'), ['serve', '--port', '0', '--data-dir', data], team, baseEnv);
    children.push(service);
    port = Number((await service.waitFor(/listening on https:\/\/[^:]+:(\d+)/))[1]);
    caFile = join(data, 'tls', 'ca.pem');
  }, 600_000);

  afterAll(async () => {
    for (const c of children.reverse()) await c.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('the tarball holds built code, types, schemas, docs, the examples the docs use and the provider bundle, and no tests or sources', async () => {
    const list = await run('tar', ['-tzf', tarball], work, baseEnv);
    const files = list.out.split('\n').filter(Boolean);
    expect(files).toEqual(
      expect.arrayContaining([
        'package/dist/cli/main.js',
        'package/dist/cdktf/index.d.ts',
        'package/dist/cdktn/index.js',
        'package/dist/provider/provider.mjs',
        'package/schemas/document.schema.json',
        'package/docs/index.md',
        // The shipped docs copy from examples/ (a user found them missing from the package).
        'package/examples/platform/projects.yaml',
        'package/examples/platform/demo.env',
        'package/examples/terraform/main.tf',
        'package/LICENSE',
      ]),
    );
    expect(files.filter((f) => /^package\/(test|bench|src|scripts)\//.test(f) || f.endsWith('.map'))).toEqual([]);
    // Node 20 is claimed: nothing installed says it needs Node 22.
    expect(install.out).not.toContain('EBADENGINE');
    const version = await dpctl(['--version'], team, baseEnv);
    expect(version.out.trim()).toBe(VERSION);
  });

  it('yaml: dpctl init, validate, apply, then a plan with no changes', async () => {
    const init = await dpctl(['init', '.'], team, baseEnv);
    expect(init.code, init.out).toBe(0);
    expect(init.out).toContain('platform/projects.yaml');
    // The editor schema is referenced by a path that exists in this repository.
    const projects = readFileSync(join(team, 'platform', 'projects.yaml'), 'utf8');
    const schemaRef = projects.match(/\$schema=(\S+)/)![1];
    expect(existsSync(join(team, 'platform', schemaRef))).toBe(true);
    // package.json merged, the tarball dependency kept.
    const pkg = JSON.parse(readFileSync(join(team, 'package.json'), 'utf8'));
    expect(pkg.dependencies['dataplatform-as-code']).toMatch(/^file:/);
    // The repository's own source id (its package name), in the scripts and the workflow.
    expect(pkg.scripts.plan).toBe('dpctl plan platform --source-id platform-config');
    // A second init refuses and names what it would overwrite.
    const again = await dpctl(['init', '.'], team, baseEnv);
    expect(again.code).toBe(1);
    expect(again.out).toMatch(/not empty \(it would overwrite .*platform\/projects\.yaml.*--force/);

    const env = { ...tenantEnv('yaml'), ORDERS_DB_PASSWORD: 'orders-pw' };
    expect((await dpctl(['validate', 'platform'], team, env)).out).toContain('valid: 5 documents');
    const apply = await dpctl(['apply', 'platform', '--source-id', 'platform-config'], team, env);
    expect(apply.code, apply.out).toBe(0);
    expect(apply.out).toContain('Apply complete: 5 done, 0 failed');
    // Accepted is not enough: the warehouse was provisioned, and everything is healthy.
    expect(apply.out).toMatch(/starter\/warehouse: provisioned\n/);
    // The connector has never synced: its connection is untested, not called healthy.
    expect(apply.out).toContain('Health: 1 healthy, 1 never run (untested).');
    const plan = await dpctl(['plan', 'platform', '--source-id', 'platform-config', '--output', 'markdown'], team, env);
    expect(plan.code, plan.out).toBe(0);
    expect(plan.out).toContain('No changes');
    expect(await projectNamed('yaml', 'starter')).toBeDefined();
    // Deploy, then run: the sync of the scaffold's connector fails (its host does not exist), and says so.
    const sync = await dpctl(['run', 'sync', 'orders-db', '--project', 'starter', '--follow'], team, env);
    expect(sync.code, sync.out).toBe(1);
    expect(sync.out).toContain('orders.db.internal');
  });

  it('the controller watches the new repository as a git source and applies a commit', async () => {
    const env = {
      ...tenantEnv('yaml'),
      ORDERS_DB_PASSWORD: 'orders-pw',
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@e',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@e',
    };
    // What init wrote keeps node_modules and state out of git.
    expect(readFileSync(join(team, '.gitignore'), 'utf8')).toContain('node_modules/');
    expect((await run('git', ['add', '.'], team, env)).code).toBe(0);
    expect((await run('git', ['commit', '-qm', 'platform'], team, env)).code).toBe(0);
    expect((await run('git', ['ls-files', 'node_modules'], team, env)).out).toBe('');
    const controller = start(
      join(team, 'node_modules', '.bin', 'dpctl'),
      [
        'controller',
        '--source',
        team,
        '--path',
        'platform',
        '--source-id',
        'platform-config',
        '--interval',
        '1s',
        '--listen',
        '127.0.0.1:0',
        '--state-dir',
        join(work, 'controller'),
      ],
      work,
      env,
    );
    children.push(controller);
    const sources = join(team, 'platform', 'starter', 'sources.yaml');
    writeFileSync(
      sources,
      readFileSync(sources, 'utf8').replace(
        'email_addresses: [data-team@example.com]',
        'email_addresses: [data-team@example.com, oncall@example.com]',
      ),
    );
    expect((await run('git', ['commit', '-qam', 'page on-call too'], team, env)).code).toBe(0);
    const project = (await projectNamed('yaml', 'starter'))!;
    const deadline = Date.now() + 60_000;
    let channel: any;
    while (Date.now() < deadline) {
      channel = ((await api('yaml', `/projects/${project.id}/notification-channels`)).data as any[]).find(
        (c) => c.name === 'data-team-email',
      );
      if (channel?.config?.email_addresses?.length === 2) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(channel.config.email_addresses, controller.output()).toEqual(['data-team@example.com', 'oncall@example.com']);
    await controller.stop();
  });

  it(
    'cdktf: dpctl init --format cdktf, synth and deploy with the real cdktf CLI; cdktn synthesizes the same',
    { timeout: 300_000 },
    async () => {
      const app = join(team, 'cdktf-app');
      const init = await dpctl(['init', app, '--format', 'cdktf'], team, baseEnv);
      expect(init.code, init.out).toBe(0);
      const env = { ...tenantEnv('cdk'), PATH: `${baseEnv.PATH}:${BIN}`, TF_VAR_ORDERS_DB_PASSWORD: 'orders-pw' };
      // The package's type declarations: the app type-checks against them (strict, NodeNext).
      const types = await run(join(BIN, 'tsc'), ['-p', 'tsconfig.json'], app, env);
      expect(types.code, types.out).toBe(0);
      expect((await dpctl(['provider', 'install'], app, env)).code).toBe(0);
      // The package's own scripts, as the scaffold wrote them (deploy carries --skip-provider-lock).
      const deploy = await run('npm', ['run', 'deploy', '--', '--no-color'], app, env);
      expect(deploy.code, deploy.out).toBe(0);
      expect(deploy.out).toMatch(/Apply complete! Resources: 5 added/);
      const project = (await projectNamed('cdk', 'starter'))!;
      const connectors = (await api('cdk', `/projects/${project.id}/connectors`)).data as Array<{ name: string }>;
      expect(connectors.map((c) => c.name)).toEqual(['orders-db']);
      const diff = await run('npm', ['run', 'diff', '--', '--no-color'], app, env);
      expect(diff.code, diff.out).toBe(0);
      expect(diff.out).toContain('No changes');
      // A misspelt attribute stops the synth with the compiler's error (the app is type-checked
      // first), where tsx alone synthesized a stack that cleared the description.
      const main = readFileSync(join(app, 'main.ts'), 'utf8');
      writeFileSync(join(app, 'main.ts'), main.replace('{ description:', '{ descriptoin:'));
      const typo = await run('npm', ['run', 'synth'], app, env);
      expect(typo.code).not.toBe(0);
      expect(typo.out).toMatch(/main\.ts\(\d+,\d+\): error TS2561: .*'descriptoin'.*Did you mean to write 'description'\?/);
      writeFileSync(join(app, 'main.ts'), main);

      // The same app on cdktn and the package's ./cdktn subpath synthesizes the same stack.
      const cdktnApp = join(team, 'cdktn-app');
      mkdirSync(cdktnApp);
      writeFileSync(join(cdktnApp, 'package.json'), '{ "type": "module" }\n');
      writeFileSync(
        join(cdktnApp, 'main.ts'),
        readFileSync(join(app, 'main.ts'), 'utf8')
          .replace("from 'cdktf'", "from 'cdktn'")
          .replace('dataplatform-as-code/cdktf', 'dataplatform-as-code/cdktn'),
      );
      const synth = await run(join(BIN, 'tsx'), ['main.ts'], cdktnApp, { ...env, CDKTF_OUTDIR: join(cdktnApp, 'out') });
      expect(synth.code, synth.out).toBe(0);
      const stackOf = (dir: string) => {
        const json = JSON.parse(readFileSync(join(dir, 'stacks', 'platform', 'cdk.tf.json'), 'utf8'));
        delete json['//'];
        delete json.terraform.backend; // the local state file's path: each app's own directory
        return json;
      };
      expect(stackOf(join(cdktnApp, 'out'))).toEqual(stackOf(join(app, 'cdktf.out')));

      // The complete example the docs point to runs from node_modules as shipped (it imported
      // ../../src/cdktf, which the package does not hold: a user found it failing).
      const exampleOut = join(team, 'example-out');
      const example = await run(
        join(BIN, 'tsx'),
        [join(team, 'node_modules', 'dataplatform-as-code', 'examples', 'cdktf', 'main.ts')],
        team,
        { ...env, CDKTF_OUTDIR: exampleOut },
      );
      expect(example.code, example.out).toBe(0);
      expect(Object.keys(JSON.parse(readFileSync(join(exampleOut, 'stacks', 'platform', 'cdk.tf.json'), 'utf8')).resource)).toHaveLength(9);
      expect(existsSync(join(exampleOut, 'stacks', 'yaml-platform', 'cdk.tf.json'))).toBe(true);
    },
  );

  it(
    "hcl: dpctl init --format hcl, terraform apply through the packaged provider (filesystem mirror), then init again from the service's network mirror",
    { timeout: 300_000 },
    async () => {
      const dir = join(team, 'terraform');
      expect((await dpctl(['init', dir, '--format', 'hcl'], team, baseEnv)).code).toBe(0);
      const env = { ...tenantEnv('hcl'), TF_VAR_orders_db_password: 'orders-pw' };
      // The release: registry layout + SHA256SUMS that verify, installable into a mirror.
      const release = join(work, 'release');
      expect((await dpctl(['provider', 'package', '--out', release], team, env)).code).toBe(0);
      const sums = readFileSync(join(release, `terraform-provider-dataplatform_${VERSION}_SHA256SUMS`), 'utf8')
        .trim()
        .split('\n');
      expect(sums).toHaveLength(5);
      for (const line of sums) {
        const [hash, name] = line.split(/\s+/);
        expect(
          createHash('sha256')
            .update(readFileSync(join(release, name)))
            .digest('hex'),
          name,
        ).toBe(hash);
      }
      const mirror = join(work, 'mirror');
      expect((await dpctl(['provider', 'install', '--from', release, '--dir', mirror], team, env)).code).toBe(0);
      writeFileSync(
        join(work, 'fs.tfrc'),
        `provider_installation {\n  filesystem_mirror {\n    path    = "${mirror}"\n    include = ["registry.terraform.io/dataplatform/*"]\n  }\n  direct {\n    exclude = ["registry.terraform.io/dataplatform/*"]\n  }\n}\n`,
      );
      const fsEnv = { ...env, TF_CLI_CONFIG_FILE: join(work, 'fs.tfrc') };
      const init = await run('terraform', ['init', '-no-color', '-input=false'], dir, fsEnv);
      expect(init.code, init.out).toBe(0);
      const apply = await run('terraform', ['apply', '-no-color', '-input=false', '-auto-approve'], dir, fsEnv);
      expect(apply.code, apply.out).toBe(0);
      expect(apply.out).toContain('Apply complete! Resources: 5 added');
      expect(await projectNamed('hcl', 'starter')).toBeDefined();
      const lock = readFileSync(join(dir, '.terraform.lock.hcl'), 'utf8');

      // The network mirror the service serves: a fresh init finds the same package (same h1).
      rmSync(join(dir, '.terraform'), { recursive: true });
      rmSync(join(dir, '.terraform.lock.hcl'));
      const tfrc = readFileSync(join(dir, 'network-mirror.tfrc'), 'utf8').replace('https://localhost:8443/', `https://localhost:${port}/`);
      writeFileSync(join(work, 'net.tfrc'), tfrc);
      const netEnv = { ...env, TF_CLI_CONFIG_FILE: join(work, 'net.tfrc'), SSL_CERT_FILE: caFile };
      const netInit = await run('terraform', ['init', '-no-color', '-input=false'], dir, netEnv);
      expect(netInit.code, netInit.out).toBe(0);
      expect(netInit.out).toContain('Installed dataplatform/dataplatform v');
      expect(readFileSync(join(dir, '.terraform.lock.hcl'), 'utf8')).toBe(lock);
      const plan = await run('terraform', ['plan', '-no-color', '-input=false', '-detailed-exitcode'], dir, netEnv);
      expect(plan.code, plan.out).toBe(0);
      // Nothing of the checkout is in what Terraform runs: the unpacked provider is the zip's four files.
      const unpacked = join(dir, '.terraform', 'providers', 'registry.terraform.io', 'dataplatform', 'dataplatform', VERSION);
      const [platform] = readdirSync(unpacked);
      expect(readdirSync(join(unpacked, platform)).filter((f) => !f.endsWith('.mjs'))).toEqual([
        `terraform-provider-dataplatform_v${VERSION}`,
      ]);
    },
  );
});
