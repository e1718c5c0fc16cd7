/**
 * The pure steps of a resource write: what a request body becomes before the store sees it
 * (normalised, secrets split off, merged into what is stored on PATCH, checked as a whole).
 * No I/O: the routes run these inside or outside their transaction as the write needs.
 */
import { formatPath, valuesAt, deleteAt, setAt, type KindDescriptor } from '../kinds/index.js';
import { normalizeCron } from '../kinds/cron.js';
import { dagProblems } from '../kinds/dag.js';
import { capFieldErrors, fieldErrorsText, generatedValidator } from '../kinds/validator.js';
import { ApiError, unprocessable } from './errors.js';
import type { Draft } from './behaviours/types.js';
import * as MERGED_VALIDATORS from './generated/merged-validators.js';

/** "a connector", "an API key": how messages name one resource of the kind. */
export const articled = (d: Pick<KindDescriptor, 'title'>) => `${startsWithVowelSound(d.title) ? 'an' : 'a'} ${d.title.toLowerCase()}`;

/** "an alert rule", "an API key", but "a user": a leading "u" said "you" (use-, uni-) takes "a". */
const startsWithVowelSound = (word: string) => /^[aeio]/i.test(word) || (/^u/i.test(word) && !/^u(se|ni)/i.test(word));

/** The same, starting a sentence: "A connector". */
export const capitalised = (text: string) => `${text[0].toUpperCase()}${text.slice(1)}`;

/** Lower-cases and trims, or canonicalises cron expressions, where the kind says so (in place). */
export function applyNormalizers(d: KindDescriptor, data: Record<string, unknown>) {
  for (const n of d.normalizers) {
    for (const { path, value } of valuesAt(data, n.path)) {
      if (typeof value !== 'string') continue;
      setAt(data, path, n.rule === 'lowercase' ? value.trim().toLowerCase() : normalizeCron(value));
    }
  }
}

/** Moves write-only values out of the body; they are stored apart and never returned. */
export function splitSecrets(d: KindDescriptor, body: Record<string, unknown>): Draft {
  let secrets: Record<string, unknown> | null = null;
  for (const path of d.secretPaths) {
    for (const found of valuesAt(body, path)) {
      if (found.value === undefined) continue;
      secrets ??= {};
      setAt(secrets, found.path, found.value);
    }
    deleteAt(body, path);
  }
  return { data: body, secrets };
}

/** Stored secrets with the incoming ones laid over them, and the paths whose value changed. */
export function mergeSecrets(
  old: Record<string, unknown> | null,
  next: Record<string, unknown> | null,
): { merged: Record<string, unknown> | null; changed: string[] } {
  const changed: string[] = [];
  const merged = structuredClone(old ?? {});
  const walk = (src: Record<string, unknown>, dst: Record<string, unknown>, prefix: string[]) => {
    for (const [key, value] of Object.entries(src)) {
      if (value && typeof value === 'object' && !Array.isArray(value)) {
        dst[key] ??= {};
        walk(value as Record<string, unknown>, dst[key] as Record<string, unknown>, [...prefix, key]);
      } else {
        if (dst[key] !== value) changed.push(formatPath([...prefix, key]));
        dst[key] = value;
      }
    }
  };
  walk(next ?? {}, merged, []);
  return { merged: Object.keys(merged).length ? merged : null, changed };
}

/** Pipeline steps and dbt models (x-dag) must form a DAG; the first problem is named. */
export function checkDags(d: KindDescriptor, data: Record<string, unknown>) {
  const [problem] = dagProblems(d.dags, data);
  if (problem) throw unprocessable(`${problem.field}: ${problem.message}`, [problem]);
}

/** PATCH with null: the field goes back to its schema default, or away; secrets under it go too. */
export function clearField(d: KindDescriptor, draft: Draft, field: string) {
  const fallback = d.schema.properties?.[field]?.default;
  if (fallback !== undefined) draft.data[field] = structuredClone(fallback);
  else delete draft.data[field];
  if (draft.secrets && field in draft.secrets) {
    delete draft.secrets[field];
    if (!Object.keys(draft.secrets).length) draft.secrets = null;
  }
}

/** The full object, secrets included, that rules across fields are checked against. */
export function withSecrets(draft: Draft): Record<string, unknown> {
  const out = structuredClone(draft.data);
  const walk = (src: Record<string, unknown>, prefix: string[]) => {
    for (const [key, value] of Object.entries(src)) {
      if (value && typeof value === 'object' && !Array.isArray(value)) walk(value as Record<string, unknown>, [...prefix, key]);
      else setAt(out, [...prefix, key], value);
    }
  };
  walk(draft.secrets ?? {}, []);
  return out;
}

/**
 * A create body as a draft: normalised, secrets split off, DAGs checked. `body` is the request's
 * own copy; it becomes the draft's data.
 */
export function createDraft(d: KindDescriptor, body: Record<string, unknown>): Draft {
  applyNormalizers(d, body);
  const draft = splitSecrets(d, body);
  checkDags(d, draft.data);
  return draft;
}

/** Immutable fields the body would change (422 naming each). */
export function assertImmutableKept(d: KindDescriptor, body: Record<string, unknown>, stored: Record<string, unknown>) {
  const immutable = d.immutableFields.filter((f) => f in body && JSON.stringify(body[f]) !== JSON.stringify(stored[f]));
  if (immutable.length) {
    throw unprocessable(
      `${immutable.join(', ')} cannot change; delete and re-create the ${d.title.toLowerCase()} instead`,
      immutable.map((field) => ({ field, message: 'is immutable' })),
    );
  }
}

/** The merged object must still be valid against the create schema as a whole (computed fields aside). */
export function assertMergedValid(d: KindDescriptor, draft: Draft) {
  // The kind's create schema, generated at build time (validator-codegen.ts) for each kind with PATCH.
  const check = generatedValidator(MERGED_VALIDATORS, d.kind);
  const full = withSecrets(draft);
  for (const f of d.computedFields) delete full[f];
  if (!check(full)) {
    const found = capFieldErrors(check.errors);
    throw new ApiError('validation_error', `The updated ${d.title.toLowerCase()} is invalid: ${fieldErrorsText(found)}`, found.details);
  }
}

/**
 * A PATCH body (normalised already) merged into what is stored: fields given replace the stored
 * ones, null clears one, secrets omitted keep their stored value. Checks immutable fields first,
 * then the merged whole and its DAGs. `changed` lists the secret paths whose value changed.
 */
export function patchDraft(
  d: KindDescriptor,
  stored: { data: Record<string, unknown>; secrets: Record<string, unknown> | null },
  body: Record<string, unknown>,
): { draft: Draft; changed: string[] } {
  assertImmutableKept(d, body, stored.data);
  const incoming = splitSecrets(d, body);
  const { merged, changed } = mergeSecrets(stored.secrets, incoming.secrets);
  const draft: Draft = { data: { ...stored.data }, secrets: merged };
  for (const [field, value] of Object.entries(incoming.data)) {
    if (value !== null) draft.data[field] = value;
    else clearField(d, draft, field);
  }
  assertMergedValid(d, draft);
  checkDags(d, draft.data);
  return { draft, changed };
}
