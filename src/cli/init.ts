import { Command, Option } from 'commander';
import type { InitFormat } from './init/templates.js';

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
    .option(
      '--source-id <id>',
      "yaml: the ownership label of this repository's resources, unique per tenant (default: the repository's name)",
    )
    .action(async (dir: string, opts: { format: InitFormat; force: boolean; packageSpec?: string; sourceId?: string }) => {
      const { initRepository } = await import('./init/init.js');
      const r = initRepository(dir, opts);
      process.stdout.write(
        `wrote a ${opts.format} configuration repository in ${r.dir}\n${r.written.map((p) => `  ${p}${r.overwritten.includes(p) ? ' (overwritten)' : ''}\n`).join('')}`,
      );
      for (const w of r.warnings) process.stderr.write(`warning: ${w}\n`);
      const cd = r.dir === process.cwd() ? '' : `  cd ${dir}\n`;
      process.stdout.write(`next:\n${cd}  npm install\n  ${next(opts.format, r.sourceId)}\n`);
    });
}

function next(format: InitFormat, sourceId: string): string {
  if (format === 'cdktf') return 'npx dpctl provider install && npm run synth && npm run deploy';
  if (format === 'hcl') return 'npx dpctl provider install && terraform init && terraform plan';
  // The first apply creates the project, which a project's API key cannot.
  return `npx dpctl validate platform && npm run plan   # dpctl plan platform --source-id ${sourceId}; DATAPLATFORM_URL set, and an admin's DATAPLATFORM_EMAIL/PASSWORD for the first apply`;
}
