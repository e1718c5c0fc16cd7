import type { Agent } from './undici.js';
import { KINDS } from '../kinds/index.js';
import { ApiKeyCredentials, PasswordCredentials } from './auth.js';
import { apiBase, clientConfigFromEnv, DEFAULT_RETRY, validateConfig, type ClientConfig } from './config.js';
import { DataPlatformError } from './errors.js';
import type { ClientEvent } from './events.js';
import type {
  Alert,
  AuditLogEntry,
  ConnectionTest,
  DiscoveredSchema,
  InfrastructureApply,
  InfrastructurePlan,
  LineageGraph,
  Model,
  Run,
  RunTrigger,
  WritableKindName,
  WritableKinds,
} from '../kinds/generated/kinds.js';
import { DEFAULT_RATE_LIMIT_RESERVE, HttpCore, type CallResult, type CallSpec, type Method } from './http.js';
import { KindResourceClient, ListEndpoint, type CallOptions, type DynamicResourceClient, type ResourceClient } from './resources.js';
import { StatsRecorder, type ClientStats } from './stats.js';
import { StreamsClient } from './streams.js';
import { createAgent, tlsConnectOptions } from './transport.js';

export type ProjectKindName = { [K in WritableKindName]: WritableKinds[K]['scope'] extends 'project' ? K : never }[WritableKindName];
export type TenantKindName = Exclude<WritableKindName, ProjectKindName>;

export type AlertFilters = { status?: Alert['status']; severity?: Alert['severity'] };
export type AuditLogFilters = {
  /** Exact action, e.g. `connector.create`. */
  action?: string;
  /** Actor id or name (email). */
  actor?: string;
  resource_type?: string;
  outcome?: 'success' | 'failure';
  /** ISO 8601; entries at or after. */
  since?: string;
  /** ISO 8601; entries before. */
  until?: string;
};
/** Whose run history: a connector's syncs, a pipeline's runs or a dbt project's runs. */
export type RunOwner = { connectorId: string } | { pipelineId: string } | { dbtProjectId: string };

/** Alerts of a project: list with filters, and the two transitions. */
export class AlertsClient extends ListEndpoint<Alert, AlertFilters> {
  /** firing -> acknowledged (409 conflict from any other state). Not re-sent after an ambiguous failure. */
  async acknowledge(alertId: string, options: CallOptions = {}): Promise<Alert> {
    return this.transition('acknowledge', alertId, options);
  }
  /** firing or acknowledged -> resolved. Not re-sent after an ambiguous failure. */
  async resolve(alertId: string, options: CallOptions = {}): Promise<Alert> {
    return this.transition('resolve', alertId, options);
  }
  private async transition(verb: 'acknowledge' | 'resolve', alertId: string, options: CallOptions) {
    const res = await this.core.call<Alert>({
      method: 'POST',
      route: `${this.route}/{alertId}/${verb}`,
      params: { ...this.params, alertId },
      signal: options.signal,
    });
    return res.body;
  }
}

const VERSION = '0.1.0';

/**
 * Client of the Data Platform Management API. One instance per tenant URL and credential;
 * share it between workers so they share its connection pool, its 429 pauses, its token
 * renewal and its counters.
 */
export class DataPlatformClient {
  /** `https://<tenant host>/api/v1` */
  readonly baseUrl: string;
  readonly #core: HttpCore;
  readonly #agent: Agent;
  readonly #stats = new StatsRecorder();
  readonly #streams: StreamsClient;

  constructor(config: ClientConfig) {
    validateConfig(config);
    this.baseUrl = apiBase(config.url);
    const tls = tlsConnectOptions(config);
    this.#agent = createAgent(config, tls);
    const onEvent = config.onEvent;
    const emit = (event: ClientEvent) => {
      if (!onEvent) return;
      try {
        onEvent(event);
      } catch {
        // An observer's bug must not break a request.
      }
    };
    const userAgent = config.userAgent ?? `dataplatform-client/${VERSION} (node ${process.version})`;
    this.#core = new HttpCore({
      base: this.baseUrl,
      agent: this.#agent,
      retry: { ...DEFAULT_RETRY, ...(config.retry ?? {}) },
      retryPatch: config.retryPatch ?? false,
      rateLimitReserve: config.rateLimitReserve ?? DEFAULT_RATE_LIMIT_RESERVE,
      userAgent,
      signal: config.signal,
      stats: this.#stats,
      emit,
    });
    if (config.apiKey) {
      this.#core.setCredentials(new ApiKeyCredentials(config.apiKey));
    } else {
      const subject = `${new URL(this.baseUrl).origin} ${config.email!.trim().toLowerCase()}`;
      this.#core.setCredentials(
        new PasswordCredentials(this.#core, config.email!, config.password!, subject, config.tokenStore, emit, config.signal),
      );
    }
    this.#streams = new StreamsClient({ core: this.#core, tls, userAgent, emit, signal: config.signal }, (projectId, pipelineId, runId) =>
      this.pipelineRun(projectId, pipelineId, runId),
    );
  }

  /** The WebSocket streams (alerts, pipeline run step updates), reconnecting; see streams.ts. */
  get streams(): StreamsClient {
    return this.#streams;
  }

  /** A client configured from DATAPLATFORM_* variables (see clientConfigFromEnv). */
  static fromEnv(env: NodeJS.ProcessEnv = process.env, overrides: Partial<ClientConfig> = {}): DataPlatformClient {
    return new DataPlatformClient(clientConfigFromEnv(env, overrides));
  }

  /** The typed resource API of a kind: tenant-level kinds take no scope, project kinds a `{ projectId }`. */
  resources<K extends TenantKindName>(kind: K): ResourceClient<K>;
  resources<K extends ProjectKindName>(kind: K, scope: { projectId: string }): ResourceClient<K>;
  resources(kind: WritableKindName, scope?: { projectId: string }): unknown {
    return this.resourcesOf(kind, scope);
  }

  /** The same, for a kind known only at run time (bodies are plain records). */
  resourcesOf(kind: string, scope: { projectId?: string } = {}): DynamicResourceClient {
    const descriptor = KINDS.get(kind);
    if (!descriptor) throw new DataPlatformError(`unknown kind ${kind}`);
    return new KindResourceClient(this.#core, descriptor, descriptor.scope === 'project' ? scope.projectId : undefined);
  }

  get projects(): ResourceClient<'project'> {
    return this.resources('project');
  }

  get users(): ResourceClient<'user'> {
    return this.resources('user');
  }

  apiKeys(projectId: string): ResourceClient<'api_key'> {
    return this.resources('api_key', { projectId });
  }

  alerts(projectId: string): AlertsClient {
    return new AlertsClient(this.#core, '/projects/{id}/alerts', { id: projectId });
  }

  auditLogs(projectId: string): ListEndpoint<AuditLogEntry, AuditLogFilters> {
    return new ListEndpoint(this.#core, '/projects/{id}/audit-logs', { id: projectId });
  }

  /** Models of a dbt project, dependencies first. */
  dbtModels(projectId: string, dbtProjectId: string): ListEndpoint<Model, Record<string, never>> {
    return new ListEndpoint(this.#core, '/projects/{id}/dbt-projects/{dbtId}/models', { id: projectId, dbtId: dbtProjectId });
  }

  async lineage(projectId: string, dbtProjectId: string, options: CallOptions = {}): Promise<LineageGraph> {
    return (
      await this.request<LineageGraph>({
        method: 'GET',
        route: '/projects/{id}/dbt-projects/{dbtId}/lineage',
        params: { id: projectId, dbtId: dbtProjectId },
        signal: options.signal,
      })
    ).body;
  }

  /** Run history of a connector, pipeline or dbt project. */
  runs(projectId: string, owner: RunOwner): ListEndpoint<Run, Record<string, never>> {
    if ('connectorId' in owner)
      return new ListEndpoint(this.#core, '/projects/{id}/connectors/{connectorId}/runs', {
        id: projectId,
        connectorId: owner.connectorId,
      });
    if ('pipelineId' in owner)
      return new ListEndpoint(this.#core, '/projects/{id}/pipelines/{pipelineId}/runs', { id: projectId, pipelineId: owner.pipelineId });
    return new ListEndpoint(this.#core, '/projects/{id}/dbt-projects/{dbtId}/runs', { id: projectId, dbtId: owner.dbtProjectId });
  }

  async pipelineRun(projectId: string, pipelineId: string, runId: string, options: CallOptions = {}): Promise<Run> {
    return (
      await this.request<Run>({
        method: 'GET',
        route: '/projects/{id}/pipelines/{pipelineId}/runs/{runId}',
        params: { id: projectId, pipelineId, runId },
        signal: options.signal,
      })
    ).body;
  }

  async discoveredSchema(projectId: string, connectorId: string, options: CallOptions = {}): Promise<DiscoveredSchema> {
    return (
      await this.request<DiscoveredSchema>({
        method: 'GET',
        route: '/projects/{id}/connectors/{connectorId}/schema',
        params: { id: projectId, connectorId },
        signal: options.signal,
      })
    ).body;
  }

  /** The whole tenant's audit log (admin users; an extension). */
  tenantAuditLogs(): ListEndpoint<AuditLogEntry, AuditLogFilters> {
    return new ListEndpoint(this.#core, '/audit-logs', {});
  }

  /** Connects to the connector's source now; a failed connection is `success: false`, not an error. */
  async testConnection(projectId: string, connectorId: string, options: CallOptions = {}): Promise<ConnectionTest> {
    return this.post<ConnectionTest>('/projects/{id}/connectors/{connectorId}/test', { id: projectId, connectorId }, undefined, options);
  }

  /** Starts a sync; follow it with `runs(projectId, { connectorId })`. 409 while one runs. */
  async syncConnector(projectId: string, connectorId: string, options: CallOptions = {}): Promise<RunTrigger> {
    return this.post<RunTrigger>('/projects/{id}/connectors/{connectorId}/sync', { id: projectId, connectorId }, undefined, options);
  }

  async runPipeline(projectId: string, pipelineId: string, options: CallOptions = {}): Promise<RunTrigger> {
    return this.post<RunTrigger>('/projects/{id}/pipelines/{pipelineId}/run', { id: projectId, pipelineId }, undefined, options);
  }

  async runDbtProject(projectId: string, dbtProjectId: string, options: CallOptions = {}): Promise<RunTrigger> {
    return this.post<RunTrigger>('/projects/{id}/dbt-projects/{dbtId}/run', { id: projectId, dbtId: dbtProjectId }, undefined, options);
  }

  async planInfrastructure(projectId: string, options: CallOptions = {}): Promise<InfrastructurePlan> {
    return this.post<InfrastructurePlan>('/projects/{id}/infrastructure/plan', { id: projectId }, undefined, options);
  }

  /** Applies the current plan; with `planId`, only if it is still current (else 409). */
  async applyInfrastructure(projectId: string, planId?: string, options: CallOptions = {}): Promise<InfrastructureApply> {
    return this.post<InfrastructureApply>(
      '/projects/{id}/infrastructure/apply',
      { id: projectId },
      planId ? { plan_id: planId } : undefined,
      options,
    );
  }

  /** Sends a test notification through a channel and reports the delivery. */
  async testChannel(
    projectId: string,
    channelId: string,
    options: CallOptions = {},
  ): Promise<{ success: boolean; message: string; status_code?: number }> {
    return this.post('/projects/{id}/notification-channels/{channelId}/test', { id: projectId, channelId }, undefined, options);
  }

  private async post<T>(route: string, params: Record<string, string>, body: unknown, options: CallOptions): Promise<T> {
    return (await this.request<T>({ method: 'POST', route, params, ...(body === undefined ? {} : { body }), signal: options.signal })).body;
  }

  /**
   * Logs in now instead of at the first call (email and password; nothing to do for an API key,
   * or when tokens are held or stored). A caller with other work first (dpctl parses the config)
   * lets the login overlap it. `signal` stops the login, retries included.
   */
  async login(options: CallOptions = {}): Promise<void> {
    await this.#core.prefetchCredentials(options.signal);
  }

  /** Any call, by route pattern, with the same auth, retries, pauses, errors and counting. */
  request<T = unknown>(spec: CallSpec): Promise<CallResult<T>> {
    return this.#core.call<T>(spec);
  }

  /** Calls per endpoint (method + route pattern) since creation or the last resetStats(). */
  stats(): ClientStats {
    return this.#stats.snapshot();
  }

  resetStats(): void {
    this.#stats.reset();
  }

  /** When an endpoint paused by a 429 opens again (epoch ms), or undefined. */
  pausedUntil(method: Method, route: string): number | undefined {
    return this.#core.gate.pausedUntil(`${new URL(this.baseUrl).origin} ${method} ${route}`);
  }

  /** Closes the connection pool; requests in flight finish first. */
  async close(): Promise<void> {
    await this.#agent.close();
  }
}
