/**
 * Typed client of the Data Platform Management API (undici): API key or password auth with
 * refresh, 429 pauses per endpoint, safe retries, pagination, typed errors and call counts.
 */
export {
  DataPlatformClient,
  AlertsClient,
  type AlertFilters,
  type AuditLogFilters,
  type RunOwner,
  type ProjectKindName,
  type TenantKindName,
} from './client.js';
export {
  clientConfigFromEnv,
  validateConfig,
  apiBase,
  apiKeyFromFile,
  passwordFromEnv,
  secretFromFile,
  DEFAULT_RETRY,
  type ClientConfig,
  type RetryOptions,
} from './config.js';
export {
  DataPlatformError,
  ClientConfigError,
  ApiError,
  NetworkError,
  AmbiguousRequestError,
  AmbiguousCreateError,
  type ErrorCode,
  type ErrorDetail,
  type CreateIdentity,
} from './errors.js';
export type { ClientEvent } from './events.js';
export { formatRoute, type CallSpec, type CallResult, type Method, type Query } from './http.js';
export {
  PAGE_LIMIT,
  ListEndpoint,
  kindRoutes,
  type Page,
  type PageOptions,
  type CallOptions,
  type ResourceClient,
  type DynamicResourceClient,
} from './resources.js';
export type { ClientStats, EndpointStats } from './stats.js';
export { FileTokenStore, MemoryTokenStore, type TokenStore, type Tokens } from './token-store.js';
export { localhostLookup, serviceUnreachable } from './transport.js';
export {
  EventStream,
  StreamsClient,
  StreamClosedError,
  type StepUpdate,
  type AlertEvent,
  type StreamOptions,
  type PipelineRunStreamOptions,
} from './streams.js';
export { parseRetryAfter } from './rate-gate.js';
export { testConnectionOf, type ConnectionTestResult } from './actions.js';
export {
  provisionProject,
  provisioningRoutes,
  failedChanges,
  ProvisioningTimeout,
  ProvisioningRefused,
  type ProvisionOptions,
  type ProvisionResult,
  type ProvisioningPlan,
  type ProvisioningRun,
  type ProvisioningChange,
} from './provisioning.js';
export * from '../kinds/generated/kinds.js';
