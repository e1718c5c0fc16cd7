import { Command } from 'commander';
import { pushAll } from '../collections.js';
import { rootCauses, showErrors, type ConfigError } from '../config/errors.js';

/** `dpctl validate <path...>`: every error of every file, before anything is sent anywhere. */
export function validateCommand(): Command {
  return new Command('validate')
    .description(
      'Check declarative YAML (files, or directories read recursively) against the document schema, names, projects and references; sends nothing to any server',
    )
    .argument('<paths...>', 'YAML files or directories (*.yaml, *.yml)')
    .option(
      '--allow-undeclared-projects',
      'metadata.project may name a project that exists on the server without a Project document',
      false,
    )
    .option('--check-secrets', 'also read every secretRef (environment variables, files) and check the values', false)
    .option('--no-cache', 'do not use the parse/validation cache (DPCTL_CACHE_DIR, else $XDG_CACHE_HOME/dpctl or ~/.cache/dpctl)')
    .option(
      '-o, --output <format>',
      'text, or json: every error with its code (docs/guides/errors.md), file, line and column on stdout',
      'text',
    )
    .action(async (paths: string[], opts: { allowUndeclaredProjects: boolean; checkSecrets: boolean; cache?: boolean; output: string }) => {
      if (opts.output !== 'text' && opts.output !== 'json')
        throw new Error(`--output must be text or json, not ${JSON.stringify(opts.output)}`);
      const { ConfigParseCache, PersistentParseCache, formatConfigError, loadConfig, projectLayout, resolveSecrets, sortErrors } =
        await import('../config/index.js');
      // Valid files parsed and validated by an earlier run (validate, plan, apply...) are not parsed again; files with errors never come from the cache.
      const cache = opts.cache === false ? undefined : new ConfigParseCache({ persistent: new PersistentParseCache(), memory: false });
      const { config, errors } = loadConfig(paths, { allowUndeclaredProjects: opts.allowUndeclaredProjects, cache });
      if (opts.checkSecrets) pushAll(errors, resolveSecrets(config.documents).errors);
      const all = sortErrors(errors, config.files);
      if (opts.output === 'json') {
        process.stdout.write(`${JSON.stringify(validationJson(all, config.documents.length, config.files.length), null, 2)}\n`);
        if (all.length) process.exitCode = 1;
        return;
      }
      if (all.length) {
        process.stderr.write(showErrors(all.map((e) => ({ text: formatConfigError(e), follows: e.follows === true }))));
        const files = new Set(all.map((e) => e.file)).size;
        const roots = rootCauses(all);
        const causes = roots < all.length ? ` (${roots} root cause${roots === 1 ? '' : 's'})` : '';
        process.stderr.write(
          `invalid: ${all.length} error${all.length === 1 ? '' : 's'} in ${files} file${files === 1 ? '' : 's'}${causes}\n`,
        );
        process.exitCode = 1;
        return;
      }
      const counts = new Map<string, number>();
      for (const doc of config.documents) counts.set(doc.yamlKind, (counts.get(doc.yamlKind) ?? 0) + 1);
      const byKind = [...counts].map(([k, n]) => `${n} ${k}`).join(', ');
      const projects = new Set(
        config.documents.flatMap((d) => (d.project !== undefined ? [d.project] : d.layout === projectLayout() ? [d.name] : [])),
      ).size;
      process.stdout.write(
        `valid: ${config.documents.length} document${config.documents.length === 1 ? '' : 's'} in ${config.files.length} file${config.files.length === 1 ? '' : 's'}, ${projects} project${projects === 1 ? '' : 's'} (${byKind || 'nothing declared'})\n`,
      );
    });
}

/** `validate -o json`: the errors as structured values (root causes first, as in text), with counts by code. */
export function validationJson(errors: ConfigError[], documents: number, files: number) {
  const byCode: Record<string, number> = {};
  for (const e of errors) byCode[e.code] = (byCode[e.code] ?? 0) + 1;
  return {
    valid: errors.length === 0,
    documents,
    files,
    root_causes: rootCauses(errors),
    by_code: byCode,
    errors: errors.map((e) => ({
      code: e.code,
      file: e.file,
      line: e.line,
      column: e.column,
      subject: e.subject,
      field: e.field,
      message: e.message,
      ...(e.follows ? { follows: true } : {}),
      ...(e.followers ? { followers: e.followers } : {}),
    })),
  };
}
