import { resolve } from 'node:path';
import { Command } from 'commander';

export function providerCommand(): Command {
  const cmd = new Command('provider').description('The Terraform provider (dataplatform/dataplatform)');
  cmd
    .command('package')
    .description('Write the provider release: a zip per platform, SHA256SUMS, the manifest, and the network-mirror JSON')
    .requiredOption('--out <dir>', 'release directory (publish it on any HTTPS file server as a provider network mirror)')
    .action(async (opts: { out: string }) => {
      const { buildRelease, MIRROR_PATH } = await import('../distribution/provider-release.js');
      const { writeRelease } = await import('../distribution/install.js');
      const out = resolve(opts.out);
      const release = await buildRelease();
      const written = writeRelease(release, out);
      process.stdout.write(
        `wrote the release of dataplatform/dataplatform ${release.version} to ${out}\n${written.map((p) => `  ${p}\n`).join('')}`,
      );
      process.stdout.write(
        `as a network mirror, once published at https://<server>/<path>/:\n  provider_installation {\n    network_mirror { url = "https://<server>/<path>/" }\n  }\n  (${MIRROR_PATH}/index.json is what Terraform reads first)\n`,
      );
    });
  cmd
    .command('install')
    .description('Install the provider into a Terraform filesystem mirror (packed layout)')
    .option('--dir <mirror>', 'filesystem mirror root (default ~/.terraform.d/plugins)')
    .option('--from <release>', "a release directory written by `dpctl provider package` (default: this package's own provider)")
    .option('--platform <os_arch...>', 'Terraform platforms (default all of the release: linux and darwin, amd64 and arm64)')
    .action(async (opts: { dir?: string; from?: string; platform?: string[] }) => {
      const { installProvider } = await import('../distribution/install.js');
      const installed = await installProvider({ dir: opts.dir, from: opts.from, platforms: opts.platform });
      for (const version of new Set(installed.map((r) => r.version))) {
        const zips = installed.filter((r) => r.version === version);
        process.stdout.write(
          `installed ${zips[0].source} ${version} (${zips.map((r) => r.platform).join(', ')})\n${zips.map((r) => `  ${r.path}\n`).join('')}`,
        );
        process.stdout.write(
          `use it with:\n  terraform {\n    required_providers {\n      dataplatform = { source = "dataplatform/dataplatform", version = "${version}" }\n    }\n  }\n`,
        );
      }
    });
  return cmd;
}
