import { Command } from 'commander';
import { DEFAULT_MIRROR, installProvider } from '../provider/install.js';

export function providerCommand(): Command {
  const cmd = new Command('provider').description('The Terraform provider (dataplatform/dataplatform)');
  cmd
    .command('install')
    .description('Install the provider into a Terraform filesystem mirror')
    .option('--dir <mirror>', 'filesystem mirror root', DEFAULT_MIRROR)
    .action((opts: { dir: string }) => {
      const r = installProvider({ dir: opts.dir });
      process.stdout.write(`installed ${r.source} ${r.version}\n  ${r.path}\n`);
      process.stdout.write(`use it with:\n  terraform {\n    required_providers {\n      dataplatform = { source = "dataplatform/dataplatform", version = "${r.version}" }\n    }\n  }\n`);
    });
  return cmd;
}
