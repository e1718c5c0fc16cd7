import type { JsonSchema } from '../kinds/index.js';

/**
 * Per-resource policies, written as `metadata.annotations` of a document (Crossplane's
 * management policies, Argo CD's ignoreDifferences, Terraform's prevent_destroy and
 * ignore_changes). Described once here: the document schema, the loader, the plan and the docs
 * read this table. Any other `dpctl.dev/` annotation is an error (a typo must not silently
 * drop a policy); annotations outside that prefix are the user's own and are kept.
 */

export const POLICY_PREFIX = 'dpctl.dev/';

export const RECONCILE_ANNOTATION = 'dpctl.dev/reconcile';
export const IGNORE_FIELDS_ANNOTATION = 'dpctl.dev/ignore-fields';
export const PREVENT_DESTROY_ANNOTATION = 'dpctl.dev/prevent-destroy';
export const SECRETS_VERSION_ANNOTATION = 'dpctl.dev/secrets-version';

export const POLICY_ANNOTATIONS: Record<string, JsonSchema> = {
  [RECONCILE_ANNOTATION]: {
    type: 'string',
    enum: ['apply', 'observe', 'disabled'],
    description:
      'apply (the default): plan and apply it. observe: plan and drift report it, never write it. disabled: ignore the document (never planned, written or pruned).',
  },
  [IGNORE_FIELDS_ANNOTATION]: {
    type: 'string',
    pattern: '^\\s*[A-Za-z0-9_./-]+(\\s*,\\s*[A-Za-z0-9_./-]+)*\\s*$',
    description:
      'Comma-separated API field paths (config.port, labels.team, schedule) whose differences plan, apply and drift ignore; an update keeps the live value there.',
  },
  [PREVENT_DESTROY_ANNOTATION]: {
    type: 'string',
    enum: ['true', 'false'],
    description: '"true": any plan that would delete or replace this resource fails, naming it (with --prune too).',
  },
  [SECRETS_VERSION_ANNOTATION]: {
    type: 'string',
    minLength: 1,
    maxLength: 64,
    description:
      "Any value; a new one sends the resource's secrets again (as Terraform's password_wo_version). Secrets are write-only: a secret changed outside the config cannot be seen, and changing this puts the configured values back.",
  },
};

export interface ResourcePolicy {
  reconcile: 'apply' | 'observe' | 'disabled';
  /** API field paths, split on dots (`labels.team` -> ['labels', 'team']). */
  ignoreFields: string[][];
  preventDestroy: boolean;
  /** dpctl.dev/secrets-version: part of the secrets' fingerprint, so a new value sends them again. */
  secretsVersion?: string;
}

export const DEFAULT_POLICY: ResourcePolicy = Object.freeze({
  reconcile: 'apply',
  ignoreFields: Object.freeze([]) as unknown as string[][],
  preventDestroy: false,
});

/** The JSON Schema of `metadata.annotations`: string values; the known dpctl.dev/ keys checked; other dpctl.dev/ keys refused. */
export function annotationsSchema(): JsonSchema {
  const known = Object.keys(POLICY_ANNOTATIONS);
  return {
    type: 'object',
    description: `Annotations: any string key/value; the ${POLICY_PREFIX} ones are dpctl's per-resource policies (${known.join(', ')}).`,
    properties: POLICY_ANNOTATIONS,
    additionalProperties: { type: 'string' },
    propertyNames: { anyOf: [{ enum: known }, { not: { pattern: `^${POLICY_PREFIX.replace(/[./]/g, (c) => `\\${c}`)}` } }] },
  } as JsonSchema;
}

/** What `dpctl validate` says about a dpctl.dev/ annotation it does not know (a typo must not pass silently). */
export function unknownPolicyMessage(key: string): string {
  return `unknown annotation ${key}: the ${POLICY_PREFIX} annotations are ${Object.keys(POLICY_ANNOTATIONS).join(', ')}`;
}

/** The policy of a validated document's annotations (the schema already refused bad values). */
export function policyOf(annotations: unknown): ResourcePolicy {
  if (!annotations || typeof annotations !== 'object') return DEFAULT_POLICY;
  const a = annotations as Record<string, string>;
  const reconcile = (a[RECONCILE_ANNOTATION] as ResourcePolicy['reconcile'] | undefined) ?? 'apply';
  const ignoreFields = (a[IGNORE_FIELDS_ANNOTATION] ?? '')
    .split(',')
    .map((f) => f.trim())
    .filter(Boolean)
    .map((f) => f.split('.'));
  const preventDestroy = a[PREVENT_DESTROY_ANNOTATION] === 'true';
  const secretsVersion = a[SECRETS_VERSION_ANNOTATION];
  if (reconcile === 'apply' && !ignoreFields.length && !preventDestroy && secretsVersion === undefined) return DEFAULT_POLICY;
  return { reconcile, ignoreFields, preventDestroy, ...(secretsVersion === undefined ? {} : { secretsVersion }) };
}

/** True when a changed field (`config.port`, `labels.team`, `steps[1].name`) is at or under an ignored path. */
export function isIgnored(policy: ResourcePolicy, field: string): boolean {
  return policy.ignoreFields.some((parts) => {
    const path = parts.join('.');
    return field === path || field.startsWith(`${path}.`) || field.startsWith(`${path}[`);
  });
}
