// The construct library for cdktn users: dist/cdktn is dist/cdktf with its one import point
// (cdk.js, see src/cdktf/cdk.ts) switched from 'cdktf' to 'cdktn'. Every other file of the
// library imports './cdk.js' or '../cdk.js', so the copy needs nothing else changed; both
// subpaths share dist/config and dist/kinds.
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';

rmSync('dist/cdktn', { recursive: true, force: true });
cpSync('dist/cdktf', 'dist/cdktn', { recursive: true });
for (const file of ['cdk.js', 'cdk.d.ts']) {
  const path = `dist/cdktn/${file}`;
  const text = readFileSync(path, 'utf8');
  const switched = text.replace(/from 'cdktf';/g, "from 'cdktn';");
  if (switched === text) throw new Error(`${path} has no import from 'cdktf' to switch: src/cdktf/cdk.ts changed shape`);
  writeFileSync(path, switched);
}
