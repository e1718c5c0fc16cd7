import { setAt } from '../kinds/index.js';
import { ConfigValidationError, type ConfigError } from './errors.js';
import { subjectOf, type ConfigDocument } from './model.js';
import { checkReferences, type ReferenceLookup } from './references.js';
import type { ResolvedSecrets } from './secrets.js';

/**
 * The exact body to send to the API to create the resource, or to PATCH it to what the
 * document declares: identity from metadata.name, metadata.labels as `labels`, references
 * as ids (from `resolveRef`), secrets as values (from resolveSecrets). Fields the document
 * leaves out stay out (the server fills defaults on create and keeps stored values on PATCH).
 * Throws ConfigValidationError listing every reference or secret it cannot fill.
 */
export function toApiBody(doc: ConfigDocument, resolveRef: ReferenceLookup, secrets: ResolvedSecrets): Record<string, unknown> {
  const body = structuredClone(doc.body);
  const errors: ConfigError[] = checkReferences(doc, resolveRef);
  for (const ref of doc.references) {
    const id = resolveRef(ref.kind, doc.project, ref.name);
    if (id !== undefined) setAt(body, ref.path, id);
  }
  for (const secret of doc.secrets) {
    const value = secrets.get(doc, secret.field);
    if (value === undefined) {
      errors.push({ ...secret.location, subject: subjectOf(doc), field: secret.yamlField, message: 'secret not resolved (run resolveSecrets first)' });
      continue;
    }
    setAt(body, secret.path, value);
  }
  if (errors.length) throw new ConfigValidationError(errors);
  return body;
}
