import { createHash } from 'node:crypto';
import type { ConfigDocument, ResolvedSecrets } from '../config/index.js';
import { canonicalJson } from '../kinds/canonical.js';
import type { LiveResource } from './observe.js';
import { planJson } from './format.js';
import { docKey, subjectOfChange, type Plan, type PlannedChange } from './plan.js';
import { secretsFingerprint } from './fingerprint.js';

/**
 * Saved plans, as `terraform plan -out`: `dpctl plan --out FILE` writes what it would do, and
 * `dpctl apply FILE` applies exactly that or refuses. Each change carries two fingerprints: of
 * the document as declared (secret values only as their SHA-256) and of the live resource's
 * declarable fields (status, timestamps and other computed fields are left out: a sync that ran
 * meanwhile does not make the plan stale). The file never holds a secret value.
 */

export const SAVED_PLAN_FORMAT = 'dpctl-plan/v1';

export interface SavedChange {
  /** `Kind project/name`, as printed. */
  subject: string;
  action: PlannedChange['action'];
  config_sha: string | null;
  live_sha: string | null;
}

export interface SavedPlan {
  format: typeof SAVED_PLAN_FORMAT;
  created_at: string;
  /** The configuration planned (absolute) and the options that shape a plan: apply re-plans with the same. */
  config_path: string;
  options: {
    source_id: string;
    prune: boolean;
    allow_mass_delete: boolean;
    adopt: boolean;
    spec_operations: boolean;
    allow_undeclared_projects: boolean;
    targets: string[];
  };
  fingerprints: SavedChange[];
  /** What was shown (planJson): for people reviewing the file. */
  plan: ReturnType<typeof planJson>;
}

const sha = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * The document as declared, its secret values replaced by their SHA-256, or, with a fingerprint key
 * (DPCTL_FINGERPRINT_KEY), by their keyed fingerprint: unkeyed, whoever reads the file can test
 * guesses of a weak secret against it, as against an unkeyed label (fingerprint.ts).
 */
export function configFingerprint(doc: ConfigDocument, secrets: ResolvedSecrets, key?: string): string {
  const values = doc.secrets.map((s) => ({ field: s.field, value: secrets.get(doc, s.field) ?? '' }));
  const secretPart = key ? secretsFingerprint(docKey(doc), values, key) : values.map((v) => [v.field, sha(v.value)]);
  return sha(canonicalJson({ project: doc.project ?? null, body: doc.body, secrets: secretPart }));
}

/** The live resource's declarable fields (computed ones left out). */
export function liveFingerprint(r: LiveResource): string {
  const computed = new Set(r.descriptor.computedFields.filter((f) => f !== 'id'));
  return sha(canonicalJson(Object.fromEntries(Object.entries(r.object).filter(([k]) => !computed.has(k)))));
}

function fingerprintsOf(plan: Plan, secrets: ResolvedSecrets, key: string | undefined): SavedChange[] {
  return plan.changes.map((c) => ({
    subject: subjectOfChange(c),
    action: c.action,
    config_sha: c.doc ? configFingerprint(c.doc, secrets, key) : null,
    live_sha: c.live ? liveFingerprint(c.live) : null,
  }));
}

export function savePlan(
  plan: Plan,
  secrets: ResolvedSecrets,
  meta: Omit<SavedPlan, 'format' | 'created_at' | 'fingerprints' | 'plan'>,
  key?: string,
): SavedPlan {
  return {
    format: SAVED_PLAN_FORMAT,
    created_at: new Date().toISOString(),
    ...meta,
    fingerprints: fingerprintsOf(plan, secrets, key),
    plan: planJson(plan),
  };
}

/** A parsed file, when it is a saved plan (else null: a YAML path). */
export function asSavedPlan(text: string): SavedPlan | null {
  if (!text.trimStart().startsWith('{')) return null;
  try {
    const value = JSON.parse(text) as Partial<SavedPlan>;
    return value.format === SAVED_PLAN_FORMAT ? (value as SavedPlan) : null;
  } catch {
    return null;
  }
}

/**
 * What changed since the plan was saved, one line per resource: a fresh plan of the same
 * configuration must have the same changes with the same fingerprints. Empty: apply it.
 */
export function staleReasons(saved: SavedPlan, fresh: Plan, secrets: ResolvedSecrets, key?: string): string[] {
  const now = new Map(fingerprintsOf(fresh, secrets, key).map((f) => [f.subject, f]));
  const reasons: string[] = [];
  for (const was of saved.fingerprints) {
    const is = now.get(was.subject);
    now.delete(was.subject);
    if (!is) reasons.push(`${was.subject}: no longer in the plan`);
    else if (is.config_sha !== was.config_sha) reasons.push(`${was.subject}: the configuration changed`);
    else if (is.live_sha !== was.live_sha)
      reasons.push(
        `${was.subject}: ${was.live_sha === null ? 'now exists on the platform' : is.live_sha === null ? 'no longer exists on the platform' : 'changed on the platform'}`,
      );
    else if (is.action !== was.action) reasons.push(`${was.subject}: now planned as ${is.action}, saved as ${was.action}`);
  }
  for (const extra of now.values()) reasons.push(`${extra.subject}: new in the plan (${extra.action})`);
  return reasons;
}
