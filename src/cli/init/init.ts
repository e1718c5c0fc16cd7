import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { OWN_PACKAGE, PACKAGE_VERSION } from '../../version.js';
import { packageFields, scaffold, type InitFormat, type ScaffoldOptions } from './templates.js';

/** What installing the package leaves in a directory; `dpctl init` still counts it as empty. */
const LEFT_BY_INSTALL = new Set(['.git', 'node_modules', 'package.json', 'package-lock.json']);
const PACKAGE_NAME = 'dataplatform-as-code';
/**
 * The packages with install scripts that installing this package (and, for cdktf, cdktf-cli) brings,
 * and whether each needs its script, as this package's own package.json records them: npm 11.16+
 * warns about every script not covered by `allowScripts`, and npm 12 will block them.
 */
const ALLOW_SCRIPTS = OWN_PACKAGE.allowScripts;

export interface InitOptions {
  format: InitFormat;
  force: boolean;
  /** The version spec of this package in the new package.json (default ^<version>, or what package.json already has). */
  packageSpec?: string;
  /** The ownership label of this repository's resources (default: the repository's name). */
  sourceId?: string;
}

export interface InitResult {
  dir: string;
  sourceId: string;
  written: string[];
  overwritten: string[];
  /** What the user should fix before CI runs (a dependency CI cannot install). */
  warnings: string[];
}

/**
 * Writes a configuration repository into `dir`. A directory holding anything but what `git init`
 * and `npm install` leave is refused unless `force`, naming the files that would be overwritten;
 * an existing package.json is merged (its dependency spec for this package is kept), never
 * replaced.
 */
export function initRepository(target: string, options: InitOptions): InitResult {
  const dir = resolve(target);
  const pkgPath = join(dir, 'package.json');
  const existingPkg = existsSync(pkgPath) ? (JSON.parse(readFileSync(pkgPath, 'utf8')) as PackageJson) : undefined;
  const repoName =
    existingPkg?.name ??
    (basename(dir)
      .replace(/[^a-z0-9._-]/gi, '-')
      .toLowerCase() ||
      'platform-config');
  const sourceId = options.sourceId ?? repoName.replace(/^@[^/]+\//, '');
  if (!/^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$/i.test(sourceId))
    throw new Error(`the source id "${sourceId}" is not a label value (letters, digits, '.', '_', '-'; at most 63): pass --source-id <id>`);
  const o: ScaffoldOptions = {
    format: options.format,
    packageName: PACKAGE_NAME,
    packageSpec: options.packageSpec ?? existingPkg?.dependencies?.[PACKAGE_NAME] ?? `^${PACKAGE_VERSION}`,
    providerVersion: PACKAGE_VERSION,
    repoName,
    sourceId,
  };
  const files = scaffold(o);
  const overwritten = [...files.keys()].filter((p) => existsSync(join(dir, p)));
  const others = existsSync(dir) ? readdirSync(dir).filter((f) => !LEFT_BY_INSTALL.has(f)) : [];
  if (others.length > 0 && !options.force) {
    const what = overwritten.length
      ? `it would overwrite ${overwritten.join(', ')}`
      : `it holds ${others.slice(0, 5).join(', ')}${others.length > 5 ? ', ...' : ''}`;
    throw new Error(`${dir} is not empty (${what}); use --force to write there anyway`);
  }
  for (const [path, content] of files) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  writeFileSync(pkgPath, `${JSON.stringify(mergePackage(existingPkg, o), null, 2)}\n`);
  const warnings = [outsideRepository(o.packageSpec, dir)].filter((w): w is string => !!w);
  return { dir, sourceId, written: [...files.keys(), 'package.json'].sort(), overwritten, warnings };
}

/**
 * A dependency on a file outside the repository (`npm install ../dataplatform-as-code-0.1.0.tgz`
 * records `file:../...`): it installs here, and a CI checkout of the repository has no such file.
 */
function outsideRepository(spec: string, dir: string): string | undefined {
  if (!spec.startsWith('file:')) return undefined;
  const path = relative(dir, resolve(dir, spec.slice('file:'.length)));
  if (!path.startsWith('..') && !isAbsolute(path)) return undefined;
  return (
    `package.json installs ${PACKAGE_NAME} from ${spec}, outside this repository: a CI checkout of it cannot install that. ` +
    `Change that dependency to what CI can fetch (a git or https URL of the package, your registry's version, or ` +
    `file:vendor/<tarball> with the tarball committed); init --package-spec sets it`
  );
}

/** The fields of an existing package.json that the scaffold reads; the rest is kept as it is. */
interface PackageJson {
  name?: string;
  dependencies?: Record<string, string>;
  [field: string]: unknown;
}

function mergePackage(existing: PackageJson | undefined, o: ScaffoldOptions): Record<string, unknown> {
  const fields = packageFields(o);
  const pkg = existing ?? { name: o.repoName, version: '0.0.0', private: true };
  return {
    ...pkg,
    // The cdktf app imports this package, which is ES modules only.
    ...(o.format === 'cdktf' ? { type: 'module' } : {}),
    scripts: { ...fields.scripts, ...(pkg.scripts ?? {}) },
    dependencies: { ...fields.dependencies, ...(pkg.dependencies ?? {}) },
    allowScripts: { ...ALLOW_SCRIPTS, ...((pkg.allowScripts as Record<string, boolean> | undefined) ?? {}) },
    ...(Object.keys(fields.devDependencies).length
      ? { devDependencies: { ...fields.devDependencies, ...(pkg.devDependencies ?? {}) } }
      : {}),
  };
}
