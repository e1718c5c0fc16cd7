/**
 * The CDK for Terraform app: `cdktf synth`, `cdktf deploy platform`. Two stacks:
 * - platform: the TypeScript platform of platform-stack.ts;
 * - yaml-platform: the YAML repository of examples/platform (the one `dpctl apply` takes),
 *   through the YAML bridge, to show a repository moving to cdktf without rewriting.
 */
import { join } from 'node:path';
import { App, TerraformStack } from 'cdktf';
// The package's construct library, as an app that installed it imports it (in this repository, vitest
// maps it to src/cdktf; Node resolves it to the built dist/ of the package it is in).
import { ConfigValidationError, DataplatformProvider, YamlPlatform } from 'dataplatform-as-code/cdktf';
import { PlatformStack } from './platform-stack.js';

const app = new App();
new PlatformStack(app, 'platform');

const yamlStack = new TerraformStack(app, 'yaml-platform');
new DataplatformProvider(yamlStack, 'provider');
try {
  new YamlPlatform(yamlStack, 'platform', { paths: join(import.meta.dirname, '..', 'platform') });
} catch (err) {
  // The same file:line:column messages as `dpctl validate`, not a stack trace.
  if (!(err instanceof ConfigValidationError)) throw err;
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
}

app.synth();
