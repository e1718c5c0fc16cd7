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
  return fillBody(structuredClone(doc.body), doc, resolveRef, secrets, setAt);
}

/**
 * toApiBody for a reader that changes nothing below the top level (the plan's diff): the top
 * level is a copy of its own, and so is every object on the way to a filled reference or secret,
 * but everything else is shared with `doc.body` (no deep copy per document).
 */
export function toApiBodyShared(doc: ConfigDocument, resolveRef: ReferenceLookup, secrets: ResolvedSecrets): Record<string, unknown> {
  return fillBody({ ...doc.body }, doc, resolveRef, secrets, setAtCopying);
}

type Setter = (body: Record<string, unknown>, path: (string | number)[], value: unknown) => void;

function fillBody(
  body: Record<string, unknown>,
  doc: ConfigDocument,
  resolveRef: ReferenceLookup,
  secrets: ResolvedSecrets,
  set: Setter,
): Record<string, unknown> {
  const errors: ConfigError[] = doc.references.length ? checkReferences(doc, resolveRef) : [];
  for (const ref of doc.references) {
    const id = resolveRef(ref.kind, doc.project, ref.name);
    if (id !== undefined) set(body, ref.path, id);
  }
  for (const secret of doc.secrets) {
    const value = secrets.get(doc, secret.field);
    if (value === undefined) {
      errors.push({
        code: 'unresolved_secret',
        ...secret.location,
        subject: subjectOf(doc),
        field: secret.yamlField,
        message: 'secret not resolved (run resolveSecrets first)',
      });
      continue;
    }
    set(body, secret.path, value);
  }
  if (errors.length) throw new ConfigValidationError(errors);
  return body;
}

/** setAt on a body whose top level is its own: each object or array below it on the way is copied before it is changed. */
function setAtCopying(body: Record<string, unknown>, path: (string | number)[], value: unknown): void {
  let cur: Record<string | number, unknown> = body;
  for (let i = 0; i < path.length - 1; i++) {
    const key = path[i];
    const next = cur[key];
    const copy =
      next === null || typeof next !== 'object' ? {} : Array.isArray(next) ? next.slice() : { ...(next as Record<string, unknown>) };
    cur[key] = copy;
    cur = copy as Record<string | number, unknown>;
  }
  cur[path[path.length - 1]] = value;
}
