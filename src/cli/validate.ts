import { Command } from 'commander';

/** `dpctl validate <path...>`: every error of every file, before anything is sent anywhere. */
export function validateCommand(): Command {
  return new Command('validate')
    .description('Check declarative YAML (files, or directories read recursively) against the document schema, names, projects and references; sends nothing to any server')
    .argument('<paths...>', 'YAML files or directories (*.yaml, *.yml)')
    .option('--allow-undeclared-projects', 'metadata.project may name a project that exists on the server without a Project document', false)
    .option('--check-secrets', 'also read every secretRef (environment variables, files) and check the values', false)
    .option('--no-cache', 'do not use the parse/validation cache (DPCTL_CACHE_DIR, else $XDG_CACHE_HOME/dpctl or ~/.cache/dpctl)')
    .action(async (paths: string[], opts: { allowUndeclaredProjects: boolean; checkSecrets: boolean; cache?: boolean }) => {
      const { ConfigParseCache, PersistentParseCache, formatConfigError, loadConfig, projectLayout, resolveSecrets, sortErrors } = await import('../config/index.js');
      // Valid files parsed and validated by an earlier run (validate, plan, apply...) are not parsed again; files with errors never come from the cache.
      const cache = opts.cache === false ? undefined : new ConfigParseCache({ persistent: new PersistentParseCache(), memory: false });
      const { config, errors } = loadConfig(paths, { allowUndeclaredProjects: opts.allowUndeclaredProjects, cache });
      if (opts.checkSecrets) errors.push(...resolveSecrets(config.documents).errors);
      const all = sortErrors(errors, config.files);
      if (all.length) {
        process.stderr.write(all.map((e) => `${formatConfigError(e)}\n`).join(''));
        const files = new Set(all.map((e) => e.file)).size;
        process.stderr.write(`invalid: ${all.length} error${all.length === 1 ? '' : 's'} in ${files} file${files === 1 ? '' : 's'}\n`);
        process.exitCode = 1;
        return;
      }
      const counts = new Map<string, number>();
      for (const doc of config.documents) counts.set(doc.yamlKind, (counts.get(doc.yamlKind) ?? 0) + 1);
      const byKind = [...counts].map(([k, n]) => `${n} ${k}`).join(', ');
      const projects = new Set(config.documents.flatMap((d) => (d.project !== undefined ? [d.project] : d.layout === projectLayout() ? [d.name] : []))).size;
      process.stdout.write(
        `valid: ${config.documents.length} document${config.documents.length === 1 ? '' : 's'} in ${config.files.length} file${config.files.length === 1 ? '' : 's'}, ${projects} project${projects === 1 ? '' : 's'} (${byKind || 'nothing declared'})\n`,
      );
    });
}
