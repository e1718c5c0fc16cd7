import { Command, Option } from 'commander';

export function initCommand(): Command {
  return new Command('init')
    .description('Start a configuration repository: an example platform, editor schema, .gitignore, README and a CI workflow')
    .argument('[dir]', 'the repository directory', '.')
    .addOption(
      new Option('--format <format>', 'yaml (dpctl), cdktf (a CDK for Terraform app) or hcl (Terraform)')
        .choices(['yaml', 'cdktf', 'hcl'])
        .default('yaml'),
    )
    .option('--force', 'write into a directory that is not empty, overwriting the files named', false)
    .option('--package-spec <spec>', 'how package.json depends on this package (default: what package.json has, else ^<version>)')
    .action(async (dir: string, opts: { format: 'yaml' | 'cdktf' | 'hcl'; force: boolean; packageSpec?: string }) => {
      const { initRepository } = await import('./init/init.js');
      const r = initRepository(dir, opts);
      process.stdout.write(
        `wrote a ${opts.format} configuration repository in ${r.dir}\n${r.written.map((p) => `  ${p}${r.overwritten.includes(p) ? ' (overwritten)' : ''}\n`).join('')}`,
      );
      process.stdout.write(`next:\n  cd ${dir}\n  npm install\n  ${NEXT[opts.format]}\n`);
    });
}

const NEXT = {
  yaml: 'npx dpctl validate platform && npx dpctl plan platform   # DATAPLATFORM_URL and DATAPLATFORM_API_KEY set',
  cdktf: 'npx dpctl provider install && npm run synth && npm run deploy',
  hcl: 'npx dpctl provider install && terraform init && terraform plan',
};
