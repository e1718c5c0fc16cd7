import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { PROVIDER_HOST, PROVIDER_NAMESPACE, PROVIDER_TYPE } from '../provider/address.js';
import { buildRelease, MIRROR_PATH, RELEASE_PLATFORMS, type ProviderRelease } from './provider-release.js';

export { BUNDLE_ENTRY as PROVIDER_ENTRY, PROVIDER_VERSION } from './provider-release.js';

export const DEFAULT_MIRROR = join(homedir(), '.terraform.d', 'plugins');

/** Writes a release (see provider-release.ts) into `outDir`; returns the paths written, relative to it. */
export function writeRelease(release: ProviderRelease, outDir: string): string[] {
  for (const [path, data] of release.files) {
    mkdirSync(dirname(join(outDir, path)), { recursive: true });
    writeFileSync(join(outDir, path), data);
  }
  return [...release.files.keys()].sort();
}

export interface InstallOptions {
  /** Filesystem mirror root (default ~/.terraform.d/plugins, which Terraform searches without any CLI config). */
  dir?: string;
  /** A release directory written by `dpctl provider package` (default: the package's own, built in memory). */
  from?: string;
  /** Terraform platforms (default every platform of the release, so `providers lock` can record them all). */
  platforms?: readonly string[];
}

export interface Installed {
  path: string;
  mirror: string;
  source: string;
  version: string;
  platform: string;
}

/**
 * Installs the provider's zip into a filesystem mirror in Terraform's packed layout
 * (`<mirror>/<host>/<namespace>/<type>/terraform-provider-<type>_<version>_<os>_<arch>.zip`), so
 * `terraform init` verifies it and records its `h1:` hash, and `terraform providers lock
 * -fs-mirror=<mirror>` works. An unpacked copy of the same version that an older dpctl wrote is
 * removed (Terraform would otherwise see two packages of one version).
 */
export async function installProvider(options: InstallOptions = {}): Promise<Installed[]> {
  const mirror = resolve(options.dir ?? DEFAULT_MIRROR);
  const platforms = options.platforms ?? RELEASE_PLATFORMS;
  const zips = options.from ? zipsInRelease(options.from, platforms) : await ownZips(platforms);
  const dir = join(mirror, MIRROR_PATH);
  mkdirSync(dir, { recursive: true });
  return zips.map(({ version, platform, name, data }) => {
    rmSync(join(dir, version), { recursive: true, force: true });
    const path = join(dir, name);
    writeFileSync(path, data);
    return { path, mirror, source: `${PROVIDER_HOST}/${PROVIDER_NAMESPACE}/${PROVIDER_TYPE}`, version, platform };
  });
}

interface ZipOfVersion {
  version: string;
  platform: string;
  name: string;
  data: Buffer;
}

async function ownZips(platforms: readonly string[]): Promise<ZipOfVersion[]> {
  const release = await buildRelease({ platforms });
  return [...release.archives].map(([platform, a]) => ({
    version: release.version,
    platform,
    name: a.zip,
    data: release.files.get(a.zip)!,
  }));
}

/** Every version's zip of those platforms in a release directory. */
function zipsInRelease(from: string, platforms: readonly string[]): ZipOfVersion[] {
  if (!existsSync(from)) throw new Error(`${from} does not exist: write a release there with \`dpctl provider package --out ${from}\``);
  const pattern = /^terraform-provider-[a-z]+_([^_]+)_([a-z0-9]+_[a-z0-9]+)\.zip$/;
  const found = readdirSync(from).flatMap((name) => {
    const m = pattern.exec(name);
    return m && name.startsWith(`terraform-provider-${PROVIDER_TYPE}_`) && platforms.includes(m[2])
      ? [{ version: m[1], platform: m[2], name, data: readFileSync(join(from, name)) }]
      : [];
  });
  if (found.length === 0)
    throw new Error(`${from} has no terraform-provider-${PROVIDER_TYPE}_<version>_<platform>.zip for ${platforms.join(', ')}`);
  return found;
}
