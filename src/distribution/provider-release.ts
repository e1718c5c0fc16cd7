import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import yazl from 'yazl';
import { PACKAGE_VERSION } from '../version.js';
import { PROVIDER_HOST, PROVIDER_NAMESPACE, PROVIDER_TYPE } from '../provider/address.js';

/**
 * The Terraform provider release, in the layout of a registry release (one zip per platform,
 * `_SHA256SUMS`, `_manifest.json`), which is also a provider network mirror: the mirror protocol's
 * static JSON sits under `<host>/<namespace>/<type>/` and points at the zips with relative URLs,
 * so the directory can be published on any HTTPS file server as it is.
 *
 * A zip holds the self-contained bundle (scripts/build-provider.mjs: kinds and schema answers
 * inlined, no node_modules) and a launcher named as Terraform expects, which runs it with the
 * `node` on PATH. The provider is JavaScript, so every platform's zip has the same files; the
 * zips are deterministic (fixed times, sorted entries), so hashes agree between the filesystem
 * mirror, the network mirror and every rebuild of one version.
 */

export const PROVIDER_VERSION = PACKAGE_VERSION;

/** Where the bundle is, from src/provider or dist/provider alike. */
export const BUNDLE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'provider');
export const BUNDLE_ENTRY = join(BUNDLE_DIR, 'provider.mjs');

/** Platforms with Node.js 20 where Terraform runs a plugin without an `.exe` name. */
export const RELEASE_PLATFORMS = ['darwin_amd64', 'darwin_arm64', 'linux_amd64', 'linux_arm64'] as const;

/** The directory of the mirror protocol's JSON, relative to the release root. */
export const MIRROR_PATH = `${PROVIDER_HOST}/${PROVIDER_NAMESPACE}/${PROVIDER_TYPE}`;

const FIXED_MTIME = new Date('2020-01-01T00:00:00Z');
const BASE = `terraform-provider-${PROVIDER_TYPE}`;

export const zipName = (version: string, platform: string) => `${BASE}_${version}_${platform}.zip`;
export const executableName = (version: string) => `${BASE}_v${version}`;

export interface ProviderRelease {
  version: string;
  /** Path relative to the release root -> content. */
  files: Map<string, Buffer>;
  /** Per platform: the zip's name and its hashes as Terraform writes them into .terraform.lock.hcl. */
  archives: Map<string, { zip: string; h1: string; zh: string }>;
}

/** The files of one zip: the launcher and the bundle with its chunks, sorted by name. */
export function packageFiles(version = PROVIDER_VERSION, bundleDir = BUNDLE_DIR): Array<{ name: string; data: Buffer; mode: number }> {
  const bundle = readdirSync(bundleDir).filter((f) => f === 'provider.mjs' || (f.startsWith('provider.') && f.endsWith('.mjs')));
  if (!bundle.includes('provider.mjs')) throw new Error(`${join(bundleDir, 'provider.mjs')} is missing: run \`npm run build\` first`);
  // `sh` rather than a node shebang: an extension-less file is CommonJS or ESM depending on the
  // package.json above wherever Terraform unpacks it; `exec` keeps Terraform's signals for node.
  const launcher = `#!/bin/sh\n# Terraform provider ${PROVIDER_NAMESPACE}/${PROVIDER_TYPE} ${version}: needs Node.js 20 or newer on PATH.\nexec node "$(dirname "$0")/provider.mjs" "$@"\n`;
  return [
    { name: executableName(version), data: Buffer.from(launcher), mode: 0o100755 },
    ...bundle.map((name) => ({ name, data: readFileSync(join(bundleDir, name)), mode: 0o100644 })),
  ].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

const sha256 = (data: Buffer | string) => createHash('sha256').update(data);

/** Terraform's `h1:` hash of a package: dirhash Hash1 over the zip's files. */
export function h1Hash(files: Array<{ name: string; data: Buffer }>): string {
  const summary = [...files]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((f) => `${sha256(f.data).digest('hex')}  ${f.name}\n`)
    .join('');
  return `h1:${sha256(summary).digest('base64')}`;
}

/** A deterministic zip (yazl compresses through zlib's thread pool: the event loop stays free). */
export function zipFiles(files: Array<{ name: string; data: Buffer; mode: number }>): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const f of files) zip.addBuffer(f.data, f.name, { mtime: FIXED_MTIME, mode: f.mode, compress: true });
  zip.end();
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    zip.outputStream.on('data', (c: Buffer) => chunks.push(c));
    zip.outputStream.on('error', reject);
    zip.outputStream.on('end', () => resolve(Buffer.concat(chunks)));
  });
}

/** Builds the whole release in memory. */
export async function buildRelease(
  options: { version?: string; bundleDir?: string; platforms?: readonly string[] } = {},
): Promise<ProviderRelease> {
  const version = options.version ?? PROVIDER_VERSION;
  const platforms = options.platforms ?? RELEASE_PLATFORMS;
  const contents = packageFiles(version, options.bundleDir);
  const zip = await zipFiles(contents);
  const h1 = h1Hash(contents);
  const zh = `zh:${sha256(zip).digest('hex')}`;
  const files = new Map<string, Buffer>();
  const archives = new Map<string, { zip: string; h1: string; zh: string }>();
  for (const platform of platforms) {
    const name = zipName(version, platform);
    files.set(name, zip);
    archives.set(platform, { zip: name, h1, zh });
  }
  const manifest = `${BASE}_${version}_manifest.json`;
  files.set(manifest, Buffer.from(`${JSON.stringify({ version: 1, metadata: { protocol_versions: ['6.0'] } }, null, 2)}\n`));
  const sums = [...files].map(([name, data]) => `${sha256(data).digest('hex')}  ${name}\n`).join('');
  files.set(`${BASE}_${version}_SHA256SUMS`, Buffer.from(sums));
  for (const [path, body] of Object.entries(mirrorDocuments(version, archives)))
    files.set(path, Buffer.from(`${JSON.stringify(body, null, 2)}\n`));
  return { version, files, archives };
}

/**
 * The provider network mirror protocol's two documents: `index.json` (the versions) and
 * `<version>.json` (an archive per platform, its URL relative to that document).
 */
function mirrorDocuments(version: string, archives: ProviderRelease['archives']): Record<string, unknown> {
  const up = MIRROR_PATH.split('/')
    .map(() => '..')
    .join('/');
  return {
    [`${MIRROR_PATH}/index.json`]: { versions: { [version]: {} } },
    [`${MIRROR_PATH}/${version}.json`]: {
      archives: Object.fromEntries([...archives].map(([platform, a]) => [platform, { url: `${up}/${a.zip}`, hashes: [a.h1, a.zh] }])),
    },
  };
}
