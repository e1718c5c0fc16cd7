#!/usr/bin/env node
// Thin launcher: the CLI is compiled to dist/ (shipped in the package; in a checkout, `npm run
// build`, which `npm test`, `npm start` and the benches run for you).
import { existsSync } from 'node:fs';
import { URL } from 'node:url';

const main = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(main)) {
  // A checkout after `npm ci` has no dist/ yet: say so instead of a module-not-found stack trace.
  console.error('dpctl: the compiled CLI (dist/) is missing. In a checkout of dpctl, run `npm run build` first.');
  process.exit(1);
}
await import(main.href);
