/**
 * The declarative YAML format: Kubernetes-style documents (apiVersion dataplatform/v1),
 * derived entirely from the kind descriptors. Load and validate with loadConfig, read
 * secrets with resolveSecrets, build API bodies with toApiBody.
 */
export { CONFIG_FILE_MAX_BYTES, loadConfig, loadConfigInTurns, type LoadOptions, type LoadResult } from './load.js';
export { ConfigParseCache } from './parse-cache.js';
export { PersistentParseCache, defaultCacheDir, cacheMaxBytes } from './persistent-cache.js';
export { toApiBody } from './api-body.js';
export {
  resolveSecrets,
  trimOneNewline,
  SECRET_FILE_MAX_BYTES,
  type Confinement,
  type ResolvedSecrets,
  type SecretOptions,
} from './secrets.js';
export { checkReferences, declaredLookup, firstOf, resolveReferences, applyReferences, type ReferenceLookup } from './references.js';
export { buildDocumentSchema, renderDocumentSchema, DOCUMENT_SCHEMA_FILE, DOCUMENT_SCHEMA_ID } from './document-schema.js';
export {
  API_VERSION,
  declarableKinds,
  declarableLayouts,
  layoutOf,
  layoutByYamlKind,
  projectLayout,
  yamlReferenceName,
  type KindLayout,
  type FieldRename,
} from './layout.js';
export {
  ConfigValidationError,
  errorLines,
  formatConfigError,
  formatLocation,
  markRelation,
  rootCauses,
  showErrors,
  sortErrors,
  type ConfigError,
  type SourceLocation,
} from './errors.js';
export {
  locationOf,
  subjectOf,
  type ConfigDocument,
  type DocumentReference,
  type DocumentSecret,
  type LoadedConfig,
  type SecretRef,
} from './model.js';
export * from './policies.js';
