import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { generatedValidator, toFieldErrors, type Validator } from '../kinds/validator.js';
import * as GENERATED from './generated/document-validator.js';
import type { ConfigError } from './errors.js';
import { locationOf, subjectOf, type ConfigDocument, type DocumentSecret } from './model.js';

/** Secret values by document and API field; values never leave this object except into an API body. */
export interface ResolvedSecrets {
  get(doc: ConfigDocument, field: string): string | undefined;
  readonly size: number;
}

export interface SecretOptions {
  /** Environment to read `env` references from (default process.env). */
  env?: Record<string, string | undefined>;
  /** Reads a file (absolute path); default fs.readFileSync as UTF-8. */
  readFile?: (absolutePath: string) => string;
}

/**
 * The export name, in the generated document validator module (validator-codegen.ts), of the
 * validator of a secret field: its kind and path ('*' or an index: an array's items).
 */
export function secretValidatorName(kind: string, path: readonly (string | number)[]): string {
  return ['secret', kind, ...path.map((seg) => (typeof seg === 'number' || seg === '*' ? '' : seg))].join('$');
}

/**
 * The secret field's validator, generated at build time with the document validator: loading
 * Ajv and compiling the field's schema cost every plan, apply and drift with a secret ~0.15 s.
 */
function secretValidator(doc: ConfigDocument, secret: DocumentSecret): Validator {
  return generatedValidator(GENERATED, secretValidatorName(doc.descriptor.kind, secret.path));
}

/** A file's content minus one trailing newline (what editors and `echo` add). */
export const trimOneNewline = (text: string) => text.replace(/\r?\n$/, '');

/**
 * Reads every secretRef of the documents: environment variables and files (relative to the
 * YAML file's directory). Problems (unset variable, missing file, a value the field does not
 * accept) are errors at the secretRef's position; no message ever contains a value.
 */
export function resolveSecrets(
  documents: ConfigDocument[],
  options: SecretOptions = {},
): { secrets: ResolvedSecrets; errors: ConfigError[] } {
  const env = options.env ?? process.env;
  const read = options.readFile ?? ((p: string) => readFileSync(p, 'utf8'));
  const values = new Map<ConfigDocument, Map<string, string>>();
  const errors: ConfigError[] = [];
  for (const doc of documents) {
    for (const secret of doc.secrets) {
      const fail = (where: string, message: string) =>
        errors.push({
          code: 'unresolved_secret',
          ...locationOf(doc, `${secret.field}.secretRef.${where}`),
          subject: subjectOf(doc),
          field: secret.yamlField,
          message,
        });
      let value: string;
      let origin: string;
      if ('env' in secret.ref) {
        origin = `environment variable ${secret.ref.env}`;
        const found = env[secret.ref.env];
        if (found === undefined || found === '') {
          fail('env', `${origin} is not set${found === '' ? ' (it is empty)' : ''}`);
          continue;
        }
        value = found;
      } else {
        const path = resolve(secret.baseDir, secret.ref.file);
        origin = `file ${secret.ref.file}`;
        try {
          value = trimOneNewline(read(path));
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          const why =
            code === 'ENOENT'
              ? 'no such file'
              : code === 'EISDIR'
                ? 'it is a directory'
                : code === 'EACCES'
                  ? 'permission denied'
                  : (code ?? (err as Error).message);
          const shown = secret.displayFile ?? path;
          fail('file', `${origin} cannot be read: ${why}${shown !== secret.ref.file ? ` (looked for ${shown})` : ''}`);
          continue;
        }
      }
      const check = secretValidator(doc, secret);
      if (!check(value)) {
        for (const e of toFieldErrors(check.errors)) fail('env' in secret.ref ? 'env' : 'file', `the value of ${origin} ${e.message}`);
        continue;
      }
      let perDoc = values.get(doc);
      if (!perDoc) values.set(doc, (perDoc = new Map()));
      perDoc.set(secret.field, value);
    }
  }
  let size = 0;
  for (const m of values.values()) size += m.size;
  return { secrets: { get: (doc, field) => values.get(doc)?.get(field), size }, errors };
}
