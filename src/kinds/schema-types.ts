/** The subset of JSON Schema (draft 2020-12) our kind files use, plus our own x- keywords. */
export interface JsonSchema {
  $schema?: string;
  $id?: string;
  title?: string;
  description?: string;
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  additionalProperties?: boolean | JsonSchema;
  required?: string[];
  items?: JsonSchema;
  enum?: unknown[];
  const?: unknown;
  default?: unknown;
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  uniqueItems?: boolean;
  allOf?: JsonSchema[];
  if?: JsonSchema;
  then?: JsonSchema;
  /** Set by the server; never accepted in a request. */
  readOnly?: boolean;
  writeOnly?: boolean;
  'x-computed'?: boolean;
  /** A change forces replacement of the resource. */
  'x-immutable'?: boolean;
  /** Write-only secret: accepted, stored, never returned. */
  'x-secret'?: boolean;
  /** Returned but sensitive (e.g. an API key value shown once). */
  'x-sensitive'?: boolean;
  /** Present only in the create response. */
  'x-once'?: boolean;
  /** The value is the id of a resource of this kind in the same project. */
  'x-ref'?: string;
  /** Extra string formats checked by our validator: cron (five fields), regex. */
  'x-format'?: 'cron' | 'regex' | 'name';
  /** Value of a computed field when the resource is created. */
  'x-initial'?: unknown;
  /** An array of { name, depends_on } items that must form a DAG; the value names an item in messages. */
  'x-dag'?: string;
  /** The server normalises the value before storing it. */
  'x-normalize'?: 'lowercase';
  [key: `x-${string}`]: unknown;
}

export type Operation = 'list' | 'create' | 'get' | 'update' | 'delete';
export type PermissionLevel = 'read-only' | 'read-write' | 'admin';

/** Kind-level keywords at the top of a kind's schema file. */
export interface KindSchemaFile extends JsonSchema {
  'x-kind': string;
  'x-yaml-kind'?: string;
  'x-collection'?: string;
  'x-scope': 'tenant' | 'project';
  /** Its resources are the projects that project-scoped kinds live in (one kind has it: project). */
  'x-scope-container'?: boolean;
  'x-identity'?: string;
  'x-operations'?: Operation[];
  'x-spec-operations'?: Operation[];
  'x-write-permission'?: PermissionLevel;
  'x-read-permission'?: PermissionLevel;
  'x-read-only-kind'?: boolean;
  'x-deleted-with-parent'?: boolean;
  /**
   * At most this many resources of the kind in one scope (a project, or the tenant for tenant-scoped
   * kinds): kinds whose every resource some request or event reads together (a plan, a schema's
   * classification) cap their count, so that work stays bounded. Creating one more is 409.
   */
  'x-max-per-scope'?: number;
  'x-health'?: HealthRuleKeyword;
  /** POST {item}/{this} tests the resource's connection: `{ success, message }` (connectors' `test`). */
  'x-test-action'?: string;
  /** Resources of the kind are provisioned by a project-wide plan and apply: see ProvisioningKeyword. */
  'x-provisioning'?: ProvisioningKeyword;
}

/**
 * Sub-paths of the kind's collection: POST {collection}/{plan} computes the plan, POST
 * {collection}/{apply} `{plan_id}` applies exactly that plan (409 when stale or when an apply runs),
 * GET {collection}/{runs}/{runId} reads the apply's run with a result per change.
 */
export interface ProvisioningKeyword {
  plan: string;
  apply: string;
  runs: string;
}

/**
 * How a kind's state maps to health (`x-health`): which values of `field` are healthy,
 * progressing, degraded or suspended, and which field says why (the platform's message).
 * `null` in a list stands for a field that is null or absent (a pipeline that never ran).
 */
export interface HealthRuleKeyword {
  field: string;
  healthy?: (string | null)[];
  progressing?: (string | null)[];
  degraded?: (string | null)[];
  suspended?: (string | null)[];
  /** Field holding the platform's reason (an error message), shown when not healthy. */
  message?: string;
  /**
   * Field holding when the resource last ran (a connector's `last_sync_at`). One changed
   * (`updated_at`) after that has not run with its current settings: healthy by its state, but
   * nothing has shown that it works (HealthStatus.changedSinceRun), so it is tested again.
   */
  ranAt?: string;
}
