// Bundles the Terraform provider plugin into dist/provider/provider.mjs (what the installed
// launcher runs). Split into chunks so a start-up compiles only what it runs before the
// handshake (gRPC and the protocol); the provider itself (client, kinds, validation) is a
// chunk loaded right after, while Terraform connects.
import { readdirSync, rmSync } from 'node:fs';
import { build } from 'esbuild';

// Chunks sit beside the entry (src/kinds finds schemas/ two directories up from its file);
// those of earlier builds go first.
const CHUNK_PREFIX = 'provider.';
for (const file of readdirSync('dist/provider', { withFileTypes: true })) {
  if (file.name.startsWith(CHUNK_PREFIX) && file.name.endsWith('.mjs')) rmSync(`dist/provider/${file.name}`);
}
await build({
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
  metafile: process.argv.includes('--metafile'),
  // CommonJS dependencies call require(); ESM output has none, so each file gets one.
  banner: { js: "import { createRequire as __dpCreateRequire } from 'node:module'; const require = __dpCreateRequire(import.meta.url);" },
}).then((result) => {
  if (result.metafile) for (const [file, out] of Object.entries(result.metafile.outputs)) console.log(`${(out.bytes / 1024).toFixed(0).padStart(6)} KB  ${file}`);
});

// The schema answers, encoded once (see src/provider/static-responses.ts), from the compiled
// sources `tsc` wrote just before.
const { staticResponses } = await import('../dist/provider/provider.js');
const { loadDefinitions } = await import('../dist/provider/proto.js');
const { STATIC_METHODS, writeStaticResponses } = await import('../dist/provider/static-responses.js');
const service = loadDefinitions()['tfplugin6.Provider'];
const answers = staticResponses();
writeStaticResponses(Object.fromEntries(STATIC_METHODS.map((m) => [m, service[m].responseSerialize(answers[m])])));
