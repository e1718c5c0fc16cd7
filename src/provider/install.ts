import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PROVIDER_HOST, PROVIDER_NAMESPACE, PROVIDER_TYPE } from './address.js';

export const PROVIDER_VERSION = '0.1.0';

/** The bundled plugin entry (built by `npm run build`), from src/provider or dist/provider alike. */
export const PROVIDER_ENTRY = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'provider', 'provider.mjs');

export const DEFAULT_MIRROR = join(homedir(), '.terraform.d', 'plugins');

export interface InstallOptions {
  /** Filesystem mirror root (default ~/.terraform.d/plugins, which Terraform searches without any CLI config). */
  dir?: string;
  /** Node.js executable the launcher runs (default: the one running now). */
  node?: string;
  entry?: string;
}

/**
 * Writes `terraform-provider-dataplatform_v<version>`, a two-line shell script that execs the
 * bundled entry with Node, into `<mirror>/<host>/dataplatform/dataplatform/<version>/linux_amd64/`.
 */
export function installProvider(options: InstallOptions = {}): { path: string; mirror: string; source: string; version: string } {
  const entry = options.entry ?? PROVIDER_ENTRY;
  if (!existsSync(entry)) throw new Error(`${entry} is missing: run \`npm run build\` first`);
  const mirror = resolve(options.dir ?? DEFAULT_MIRROR);
  const platform = `${process.platform === 'darwin' ? 'darwin' : 'linux'}_${process.arch === 'arm64' ? 'arm64' : 'amd64'}`;
  const dir = join(mirror, PROVIDER_HOST, PROVIDER_NAMESPACE, PROVIDER_TYPE, PROVIDER_VERSION, platform);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `terraform-provider-${PROVIDER_TYPE}_v${PROVIDER_VERSION}`);
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  writeFileSync(path, `#!/bin/sh\nexec ${quote(options.node ?? process.execPath)} ${quote(entry)} "$@"\n`);
  chmodSync(path, 0o755);
  return { path, mirror, source: `${PROVIDER_HOST}/${PROVIDER_NAMESPACE}/${PROVIDER_TYPE}`, version: PROVIDER_VERSION };
}
