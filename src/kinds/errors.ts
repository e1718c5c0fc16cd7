/**
 * The error-code catalogue, shared by the service (which sends API codes), the client (which
 * reads them) and the client-side layers (config, engine, provider), whose problems carry a
 * code of their own so that the CLI, the controller and the provider group them by code
 * instead of matching message text. The tables of docs/guides/errors.md are generated from here
 * (scripts/generate-error-docs.ts), and every
 * API code is in the OpenAPI error envelope (test/unit/kinds/errors.test.ts checks both).
 */

/** The API's error codes (spec section 7) with the status each is usually sent with. */
export const API_ERRORS = {
  validation_error: { status: 400, meaning: 'the request is malformed or a field is invalid; `details` names each field' },
  unauthorized: { status: 401, meaning: 'no credential, or one that is expired, revoked or unknown' },
  forbidden: { status: 403, meaning: "the credential's role, tenant or IP allow-list does not permit this" },
  resource_not_found: { status: 404, meaning: 'no such resource in this tenant (or project)' },
  conflict: { status: 409, meaning: 'the request clashes with the current state: a name already taken, a resource in use, a stale plan' },
  unprocessable_entity: { status: 422, meaning: 'well-formed but not acceptable: a cycle in a DAG, too many items' },
  rate_limited: { status: 429, meaning: "over the tenant's quota for this endpoint; `Retry-After` says when to try again" },
  internal_error: { status: 500, meaning: 'the service failed; the message carries the request id, never a stack trace' },
} as const;

export type ApiErrorCode = keyof typeof API_ERRORS;

export const API_ERROR_CODES = Object.keys(API_ERRORS) as ApiErrorCode[];

/** Statuses that are not a code's usual one but that the service sends with that code. */
export const OTHER_STATUSES: Record<number, ApiErrorCode> = { 413: 'validation_error', 415: 'validation_error' };

/** The code the spec uses for a status, for answers that do not carry the envelope (a proxy's 502). */
export function apiCodeForStatus(status: number): ApiErrorCode | `http_${number}` {
  const usual = API_ERROR_CODES.find((c) => API_ERRORS[c].status === status);
  return usual ?? OTHER_STATUSES[status] ?? (status >= 500 ? 'internal_error' : `http_${status}`);
}

/** Codes of problems found in a YAML repository, before anything is sent. */
export const CONFIG_CODES = {
  file_unreadable: 'a path that does not exist, cannot be read, or holds no YAML file',
  yaml_syntax: 'the YAML cannot be parsed, or a document is not a mapping',
  invalid_field: 'a field breaks the schema of its kind: unknown, missing, wrong type or value',
  unknown_kind: 'a `kind` that is not one of the model',
  inline_secret: 'a secret written as a value instead of a `secretRef`',
  invalid_policy: 'a `dpctl.dev/` annotation that is unknown or has a bad value',
  duplicate_resource: 'two documents declare the same resource',
  too_many_resources: 'more documents of a kind in one project (or tenant) than the service lets it hold (`x-max-per-scope`)',
  undeclared_project: 'a document names a project no Project document declares (or, in a plan, that the server does not have)',
  unresolved_reference: 'a reference to a resource that is neither declared nor on the service',
  unresolved_secret: 'a `secretRef` whose environment variable or file cannot be read',
  invalid_resource: 'a resource the kind rejects beyond the schema (a cycle in a pipeline)',
  unsupported_kind: 'a kind this surface (the Terraform provider, the cdktf bridge) has no resource for',
} as const;

/** Codes of problems found while planning against the service (besides configuration codes). */
export const PLAN_CODES = {
  ownership_conflict: 'a declared resource exists and another source manages it (its managed-by label)',
  mass_delete: 'a plan would prune more managed resources than the guard allows (`--allow-mass-delete`)',
  project_prune_default_source:
    "a plan would prune a whole project with the source id defaulted to the config directory's name, which another repository may share (`--source-id` confirms)",
  prevent_destroy: 'a plan would delete or replace a resource annotated `dpctl.dev/prevent-destroy`',
  unknown_target: 'a `--target` that names no declared resource and no managed one planned for deletion',
} as const;

/** Codes of problems found on the user's side (a YAML repository, a plan): never sent by the service. */
export const PROBLEM_CODES = { ...CONFIG_CODES, ...PLAN_CODES } as const;

export type ProblemCode = keyof typeof PROBLEM_CODES;

/** Codes of the Terraform provider's own errors (an API error keeps the API's code, in its message). */
export const PROVIDER_CODES = {
  plan_mismatch: "the service's answer, or the resource read back after provisioning, differs from what Terraform planned",
  invalid_import_id: 'an import id that is not `<project_id>/<id>` or `<project_id>/<name>`',
  not_found: 'an import or a data source found nothing with that id or name',
  not_run_yet: 'a data source of the latest run, read before any run',
  invalid_value: 'a data source asked with an empty name',
  provider_unconfigured: 'a call before the provider block was configured (its configuration failed)',
  unknown_type: 'a resource, data source or view the provider does not have',
  stopped: 'Terraform stopped the provider (Ctrl-C) during the call',
  not_empty: 'a destroy of a project that still holds resources the configuration does not manage, without force_destroy',
} as const;

export type ProviderCode = keyof typeof PROVIDER_CODES;
