import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import { isWithin } from '../paths.js';
import { readSecretFile, SECRET_FILE_MAX_BYTES } from '../secret-file.js';
import { generatedValidator, toFieldErrors, type Validator } from '../kinds/validator.js';
import * as GENERATED from './generated/document-validator.js';
import type { ConfigError } from './errors.js';
import { locationOf, subjectOf, type ConfigDocument, type DocumentSecret } from './model.js';

// Where config's secretRefs have always exported them from (the reader itself is shared with the client).
export { readSecretFile, SECRET_FILE_MAX_BYTES };

/** Secret values by document and API field; values never leave this object except into an API body. */
export interface ResolvedSecrets {
  get(doc: ConfigDocument, field: string): string | undefined;
  readonly size: number;
}

export interface SecretOptions {
  /** Environment to read `env` references from (default process.env). */
  env?: Record<string, string | undefined>;
  /** Reads a file (absolute path); default readSecretFile. */
  readFile?: (absolutePath: string) => string;
  /** Where secretRefs may not reach (the controller); unset: anywhere the process can read. */
  confine?: Confinement;
}

/**
 * A configuration confined to its repository, because its authors are not the process's owners
 * (the controller, reading what anyone who can push to the repository wrote): otherwise a
 * connector whose password is `secretRef: { file: /etc/dpctl-ssh/id_ed25519 }` or
 * `{ env: DATAPLATFORM_API_KEY }`, at a host the author runs, would hand them the controller's
 * deploy key or credentials.
 */
export interface Confinement {
  /** The repository's checkout: no YAML file (LoadOptions.confineTo) nor secret file outside it is read. */
  root: string;
  /** Directories of mounted secrets that file secretRefs may also read. */
  secretDirs: string[];
  /** Prefixes of environment variables no secretRef may read: the process's own settings and credentials. */
  refusedEnvPrefixes: string[];
}

/** Confinement with the directories a file secretRef may lead into, as real paths. */
interface FileRoots {
  fileRoots: string[];
  refusedEnvPrefixes: string[];
}

function realOrResolved(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path); // a root that does not exist (yet) holds nothing
  }
}

/** Why a secretRef may not be read under confinement, or undefined. */
function confinementProblem(ref: DocumentSecret['ref'], path: string, confine: FileRoots | undefined): string | undefined {
  if (!confine) return undefined;
  if ('env' in ref) {
    const prefix = confine.refusedEnvPrefixes.find((p) => ref.env.startsWith(p));
    return prefix
      ? `environment variable ${ref.env} is refused: variables named ${prefix}* are the controller's own settings and credentials`
      : undefined;
  }
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    return undefined; // reading it reports why
  }
  if (confine.fileRoots.some((root) => isWithin(root, real))) return undefined;
  return `file ${ref.file} is refused: it leads outside the repository${confine.fileRoots.length > 1 ? ' and the secret directories (--secrets-dir)' : ''} (to ${real})`;
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
  const read = options.readFile ?? readSecretFile;
  // Roots by real path, as the files they are compared with.
  const c = options.confine;
  const confine = c && { fileRoots: [c.root, ...c.secretDirs].map(realOrResolved), refusedEnvPrefixes: c.refusedEnvPrefixes };
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
      const path = 'file' in secret.ref ? resolve(secret.baseDir, secret.ref.file) : '';
      const refused = confinementProblem(secret.ref, path, confine);
      if (refused) {
        fail('env' in secret.ref ? 'env' : 'file', refused);
        continue;
      }
      if ('env' in secret.ref) {
        origin = `environment variable ${secret.ref.env}`;
        const found = env[secret.ref.env];
        if (found === undefined || found === '') {
          fail('env', `${origin} is not set${found === '' ? ' (it is empty)' : ''}`);
          continue;
        }
        value = found;
      } else {
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
