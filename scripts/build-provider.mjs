// Bundles the Terraform provider plugin into dist/provider/provider.mjs (and its chunks): the
// files of the provider release (src/provider/release.ts zips them with a launcher). The bundle
// is self-contained: the kind files and the encoded schema answers are inlined, so it reads
// nothing from schemas/, dist/ or node_modules and runs wherever it is copied.
// Split into chunks so a start-up compiles only what it runs before the handshake (gRPC and the
// protocol); the provider itself (client, kinds, validation) is a chunk loaded right after,
// while Terraform connects.
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join } from 'node:path';
import { build } from 'esbuild';

// 1. The schema answers, encoded once (see src/provider/static-responses.ts), from the compiled
//    sources `tsc` wrote just before.
const { staticResponses } = await import('../dist/provider/provider.js');
const { loadDefinitions } = await import('../dist/provider/proto.js');
const { STATIC_METHODS, STATIC_RESPONSES_PATH, writeStaticResponses } = await import('../dist/provider/static-responses.js');
const { kindSchemaFiles } = await import('../dist/kinds/schema-files.js');
const service = loadDefinitions()['tfplugin6.Provider'];
const answers = staticResponses();
writeStaticResponses(Object.fromEntries(STATIC_METHODS.map((m) => [m, service[m].responseSerialize(answers[m])])));

// 2. Modules replaced in the bundle by their inlined data (same exports as the originals).
const inlined = {
  'schema-files.ts': [
    `export const SCHEMAS_DIR = '(inlined in the provider bundle)';`,
    `const FILES = ${JSON.stringify(kindSchemaFiles())};`,
    'export function kindSchemaFiles() { return FILES; }',
    'export function parseKindSchemaFile(text) { return JSON.parse(text); }',
  ].join('\n'),
  // Read from package.json beside dist/ at load; the release has no package.json.
  'version.ts': `export const PACKAGE_VERSION = ${JSON.stringify(JSON.parse(readFileSync('package.json', 'utf8')).version)};`,
  'static-responses.ts': [
    `export const STATIC_METHODS = ${JSON.stringify(STATIC_METHODS)};`,
    `const FILE = ${readFileSync(STATIC_RESPONSES_PATH, 'utf8').trim()};`,
    'export function readStaticResponses() {',
    '  return { responses: new Map(STATIC_METHODS.map((m) => [m, Buffer.from(FILE.responses[m], "base64")])) };',
    '}',
  ].join('\n'),
};
const inlineData = {
  name: 'inline-data',
  setup(b) {
    const filter = /[\\/]src[\\/](kinds[\\/]schema-files|provider[\\/]static-responses|version)\.ts$/;
    b.onLoad({ filter }, (args) => ({ contents: inlined[args.path.split(/[\\/]/).pop()], loader: 'js' }));
  },
};

// A module that loads a CommonJS dependency lazily through its own `require`
// (`const require = createRequire(import.meta.url)`) would leave that dependency out of the bundle
// (esbuild bundles calls of the free `require` only) and fail where the bundle is copied. Without
// that line its require() calls are the free one, which esbuild bundles (still loaded lazily, on
// the first call).
const ownRequire = /^const require = createRequire\(import\.meta\.url\);$/m;
const bundleLazyRequires = {
  name: 'bundle-lazy-requires',
  setup(b) {
    b.onLoad({ filter: /[\\/]src[\\/].*\.ts$/ }, (args) => {
      const text = readFileSync(args.path, 'utf8');
      return ownRequire.test(text) ? { contents: text.replace(ownRequire, ''), loader: 'ts' } : undefined;
    });
  },
};

// 3. The bundle. Chunks of earlier builds go first.
const CHUNK_PREFIX = 'provider.';
for (const file of readdirSync('dist/provider', { withFileTypes: true })) {
  if (file.name.startsWith(CHUNK_PREFIX) && file.name.endsWith('.mjs')) rmSync(join('dist/provider', file.name));
}
const result = await build({
  entryPoints: { provider: 'src/provider/main.ts' },
  bundle: true,
  splitting: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  outdir: 'dist/provider',
  chunkNames: `${CHUNK_PREFIX}[name]-[hash]`,
  outExtension: { '.js': '.mjs' },
  logLevel: 'warning',
  metafile: true,
  plugins: [inlineData, bundleLazyRequires],
  // CommonJS dependencies call require(); ESM output has none, so each file gets one.
  banner: { js: "import { createRequire as __dpCreateRequire } from 'node:module'; const require = __dpCreateRequire(import.meta.url);" },
});
// 4. Self-contained means no require() of a package is left: the launcher runs the bundle with
//    no node_modules beside it. (Calls only: ajv's code generator holds require("...") in strings.)
const builtins = new Set(builtinModules);
const leaks = Object.keys(result.metafile.outputs).flatMap((file) =>
  [...readFileSync(file, 'utf8').matchAll(/(?<![\w$.'"`])require\(\s*["']([^"']+)["']\s*\)/g)]
    .map((m) => m[1])
    .filter((name) => !name.startsWith('node:') && !builtins.has(name.split('/')[0]))
    .map((name) => `${file}: require("${name}")`),
);
if (leaks.length) {
  console.error(
    `build-provider: the bundle would load packages from node_modules, which the release does not ship:\n  ${[...new Set(leaks)].join('\n  ')}`,
  );
  process.exit(1);
}
if (process.argv.includes('--metafile')) {
  for (const [file, out] of Object.entries(result.metafile.outputs))
    console.log(`${(out.bytes / 1024).toFixed(0).padStart(6)} KB  ${file}`);
}
