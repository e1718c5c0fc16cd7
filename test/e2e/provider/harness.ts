import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { installProvider, PROVIDER_ENTRY } from '../../../src/distribution/install.js';
import type { TestService, TestTenant } from '../../support/service.js';

/** True when a `terraform` binary is on PATH (the provider tests skip without one). */
export const haveTerraform = await new Promise<boolean>((resolve) => execFile('terraform', ['version'], (err) => resolve(!err)));

export const PROVIDER_BLOCK = `terraform {\n  required_providers {\n    dataplatform = {\n      source  = "dataplatform/dataplatform"\n      version = "0.1.0"\n    }\n  }\n}\n\nprovider "dataplatform" {}\n`;

/** Terraform runs the bundle, not the sources: refuse a missing bundle or one older than src/provider. */
export function assertFreshBundle() {
  if (!existsSync(PROVIDER_ENTRY)) throw new Error(`${PROVIDER_ENTRY} missing: run npm run build`);
  const srcDir = join(import.meta.dirname, '..', '..', '..', 'src', 'provider');
  const newest = Math.max(...readdirSync(srcDir).map((f) => statSync(join(srcDir, f)).mtimeMs));
  if (statSync(PROVIDER_ENTRY).mtimeMs < newest) throw new Error(`${PROVIDER_ENTRY} is older than src/provider: run npm run build`);
}

/**
 * Writes a Terraform CLI config (for TF_CLI_CONFIG_FILE) that installs dataplatform/* from the
 * filesystem mirror `mirror` and nothing of it from a registry. Returns `path`.
 */
export function writeCliConfig(path: string, mirror: string): string {
  writeFileSync(
    path,
    `provider_installation {\n  filesystem_mirror {\n    path    = "${mirror}"\n    include = ["registry.terraform.io/dataplatform/*"]\n  }\n  direct {\n    exclude = ["registry.terraform.io/dataplatform/*"]\n  }\n}\n`,
  );
  return path;
}

export interface TfResult {
  code: number;
  out: string;
}

/**
 * A Terraform working directory with the provider installed in its own filesystem mirror, its
 * own CLI config (TF_CLI_CONFIG_FILE) and DATAPLATFORM_* pointing at a test tenant.
 */
export class TerraformWorkspace {
  readonly work: string;
  /** `-var` values passed to apply, plan, destroy and import. */
  readonly vars: Record<string, string> = {};

  private constructor(
    readonly root: string,
    readonly env: NodeJS.ProcessEnv,
  ) {
    this.work = join(root, 'work');
  }

  /**
   * @param endpoint the service URL the provider uses (default the tenant's; a counting proxy's
   *   URL to observe the provider's calls)
   */
  static async create(
    svc: TestService,
    t: TestTenant,
    options: { endpoint?: string; env?: Record<string, string> } = {},
  ): Promise<TerraformWorkspace> {
    assertFreshBundle();
    const root = mkdtempSync(join(tmpdir(), 'dp-tf-'));
    mkdirSync(join(root, 'work'));
    const mirror = join(root, 'mirror');
    await installProvider({ dir: mirror });
    const cliConfig = writeCliConfig(join(root, 'cli.tfrc'), mirror);
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: root,
      TF_CLI_CONFIG_FILE: cliConfig,
      CHECKPOINT_DISABLE: '1',
      TF_IN_AUTOMATION: '1',
      DATAPLATFORM_URL: options.endpoint ?? svc.url(t.slug).replace(/\/api\/v1$/, ''),
      DATAPLATFORM_EMAIL: t.adminEmail,
      DATAPLATFORM_PASSWORD: t.adminPassword,
      DATAPLATFORM_CA_FILE: svc.service.tls.certPath,
      ...(options.env ?? {}),
    };
    return new TerraformWorkspace(root, env);
  }

  /** Writes a file of the working directory (the provider block is PROVIDER_BLOCK). */
  write(name: string, content: string) {
    writeFileSync(join(this.work, name), content);
  }

  remove(name: string) {
    rmSync(join(this.work, name), { force: true });
  }

  /** Runs terraform; rejects with the whole output when the exit code is not allowed. */
  tf(args: string[], allowed: number[] = [0]): Promise<TfResult> {
    const varArgs = ['apply', 'plan', 'destroy', 'import'].includes(args[0])
      ? Object.entries(this.vars).flatMap(([k, v]) => ['-var', `${k}=${v}`])
      : [];
    const head = args[0] === 'state' || args[0] === 'providers' ? 2 : 1;
    return new Promise((resolve, reject) => {
      execFile(
        'terraform',
        [...args.slice(0, head), '-no-color', ...varArgs, ...args.slice(head)],
        { cwd: this.work, env: this.env, maxBuffer: 64 << 20 },
        (err, stdout, stderr) => {
          const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
          const out = `${stdout}\n${stderr}`;
          if (!allowed.includes(code)) reject(new Error(`terraform ${args.join(' ')} exited ${code}:\n${out}`));
          else resolve({ code, out });
        },
      );
    });
  }

  init() {
    return this.tf(['init', '-input=false']);
  }

  /** `plan -detailed-exitcode`: 0 no changes, 2 changes. */
  plan(extra: string[] = []) {
    return this.tf(['plan', '-detailed-exitcode', '-input=false', ...extra], [0, 2]);
  }

  async apply(extra: string[] = []): Promise<string> {
    return (await this.tf(['apply', '-auto-approve', '-input=false', ...extra])).out;
  }

  /** The state as Terraform shows it (`terraform show -json`). */
  async show(): Promise<any> {
    const { out } = await this.tf(['show', '-json']);
    return JSON.parse(out.slice(0, out.lastIndexOf('}') + 1));
  }

  close() {
    rmSync(this.root, { recursive: true, force: true });
  }
}
