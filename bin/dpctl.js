#!/usr/bin/env node
// Thin launcher: the CLI is compiled to dist/ (shipped in the package; in a checkout, `npm run
// build`, which `npm test` and `npm start` run when dist/ is missing).
import '../dist/cli/main.js';
