import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Command } from 'commander';
import { makeClient, parseConcurrency, withConnection, type ConnectionOpts } from '../client/options.js';
import { engineOptions, guarded, withCommon, type CommonOpts } from './plan.js';

interface ExportOpts extends ConnectionOpts {
  project: string[];
  allProjects: boolean;
  users: boolean;
  out?: string;
  concurrency: string;
}

/** `dpctl export --project <name> [--out <dir>]`: live resources as the YAML `dpctl validate` accepts. */
export function exportCommand(): Command {
  return withConnection(
    new Command('export').description(
      'Write the live resources of projects as declarative YAML (references by name, secrets as secretRefs to set)',
    ),
  )
    .option('--project <name>', 'a project to export (repeatable)', (v: string, prev: string[]) => [...prev, v], [] as string[])
    .option('--all-projects', 'export every project of the tenant', false)
    .option('--users', "also export the tenant's users (users.yaml)", false)
    .option(
      '--out <dir>',
      'write one file per kind and project under this directory (<dir>/<project>/<collection>.yaml); default: all to stdout',
    )
    .option('--concurrency <n>', 'parallel list calls', '4')
    .action((opts: ExportOpts) =>
      guarded(async () => {
        if (!opts.allProjects && !opts.project.length)
          throw new Error('say which projects: --project <name> (repeatable) or --all-projects');
        if (opts.allProjects && opts.project.length) throw new Error('--project and --all-projects exclude each other');
        const concurrency = parseConcurrency(opts.concurrency);
        const { EXPORT_HEADER, exportResources, renderDocuments } = await import('../engine/index.js');
        const client = await makeClient(opts);
        try {
          const result = await exportResources(client, {
            projects: opts.project,
            allProjects: opts.allProjects,
            tenantKinds: opts.users ? ['user'] : [],
            concurrency,
          });
          for (const w of result.warnings) process.stderr.write(`warning: ${w}\n`);
          if (opts.out) {
            for (const f of result.files) {
              const path = join(opts.out, f.path);
              mkdirSync(dirname(path), { recursive: true });
              writeFileSync(path, f.content);
            }
            const docs = result.files.reduce((n, f) => n + f.documents.length, 0);
            process.stderr.write(
              `exported ${docs} document${docs === 1 ? '' : 's'} to ${result.files.length} file${result.files.length === 1 ? '' : 's'} under ${opts.out}${result.secrets.length ? `; set ${result.secrets.length} secret variable${result.secrets.length === 1 ? '' : 's'} (listed at the top of the files)` : ''}\n`,
            );
          } else {
            process.stdout.write(
              renderDocuments(
                result.files.flatMap((f) => f.documents),
                [EXPORT_HEADER],
              ),
            );
          }
          return 0;
        } finally {
          await client.close();
        }
      }),
    );
}

/** `dpctl adopt <path>`: 0 all adopted, 2 something differs or is missing, 1 error. */
export function adoptCommand(): Command {
  return withCommon(
    new Command('adopt').description(
      'Mark existing resources that match the config as managed by this source (nothing is created or changed otherwise)',
    ),
  )
    .option('--trust-secrets', 'record the fingerprint of the configured secrets without checking them (they cannot be read back)', false)
    .option('--dry-run', 'check and report only', false)
    .action((path: string, opts: CommonOpts & { trustSecrets: boolean; dryRun: boolean }) =>
      guarded(async () => {
        const { adoptResources, adoptJson, renderAdopt, adoptExitCode } = await import('../engine/index.js');
        const client = await makeClient(opts);
        try {
          const result = await adoptResources(client, [path], {
            ...(await engineOptions(path, opts)),
            trustSecrets: opts.trustSecrets,
            dryRun: opts.dryRun,
          });
          process.stdout.write(opts.output === 'json' ? `${JSON.stringify(adoptJson(result), null, 2)}\n` : renderAdopt(result));
          return adoptExitCode(result);
        } finally {
          await client.close();
        }
      }),
    );
}
