import type { Db } from './store/db.js';
import type { MigrationReport } from './store/migrations.js';
import type { ResourceStore } from './store/resources.js';
import type { AuthService } from './auth/auth-service.js';
import type { TenantStore, Tenant } from './tenants.js';
import type { AuditLog, AuditEvent } from './audit.js';
import type { Cursors } from './pagination.js';
import type { Actor } from './auth/actor.js';
import type { PermissionLevel } from '../kinds/index.js';

export interface ServiceOptions {
  host: string;
  port: number;
  dataDir: string;
  databaseUrl?: string;
  tlsCert?: string;
  tlsKey?: string;
  baseDomain?: string;
  /** Requests per minute per tenant per endpoint. */
  rateLimit: number;
  accessTokenTtl: number;
  /** Serve only the spec's documented surface (no extensions). */
  strictSpec: boolean;
  /** Maximum request body in bytes. */
  bodyLimit: number;
  logLevel: string;
  /** Milliseconds since the epoch; injectable so tests control time. */
  clock: () => number;
  /** Simulated work (dbt models, simulated syncs, provisioning) runs this many times faster than its nominal duration. */
  timeScale: number;
  /** Seconds a connection to a connector's source may take (connect, test, discovery). */
  sourceTimeout: number;
  /** Seconds one statement of a sync may run on the source (a table's row count); default 300. */
  sourceQueryTimeout: number;
  /** PEM CA file trusted, besides the system CAs, for outbound HTTPS (webhook and Slack deliveries). */
  outboundCaFile?: string;
  /** SMTP server for email channels (`smtp://user:password@host:587`, `smtps://...`); without it email goes to the `email_outbox` table. */
  smtpUrl?: string;
  /** Sender of notification emails. */
  smtpFrom: string;
  /** Seconds between WebSocket stream heartbeats (ping and credential re-check); default 30. */
  streamHeartbeatSeconds?: number;
  /** Seconds a new connection may take to send its first byte, and then to finish the TLS handshake (docs/security.md). */
  handshakeTimeout: number;
  /** Seconds from the handshake to the first request's headers, and from any request's start to its last header. */
  headersTimeout: number;
  /** Seconds from a request's start to the end of its body (at least headersTimeout). */
  requestTimeout: number;
  /** Seconds an idle keep-alive connection stays open between requests. */
  keepAliveTimeout: number;
  /** Open connections per source address (IPv4, or IPv6 /64), WebSocket streams included; 0 for no cap. */
  maxConnectionsPerAddress: number;
  /** Open WebSocket streams per tenant on this instance (a new one past it is 429); 0 for no cap. */
  maxStreamsPerTenant: number;
  /** Most per-host TLS certificates (one per tenant host name) kept in memory. */
  tlsCertCacheSize: number;
  /** Runs kept per connector, pipeline or dbt project (the oldest finished ones go when a run starts); 0 keeps every run. */
  runHistory: number;
  /** Top-level runs (syncs, pipeline runs, dbt runs, infrastructure applies) one tenant may have executing at once on this instance; 0 for no cap. */
  maxRunsPerTenant: number;
  /** Bytes one tenant may store (resources and audit log, store/usage.ts) before creates and updates are refused; 0 for no cap. */
  maxTenantStorage: number;
  /** Days an audit log entry is kept (runtime/retention.ts); 0 keeps every entry. */
  auditRetentionDays: number;
  /** Requests per minute per source address per anonymous endpoint (login, refresh, SSO, invitations); never the tenant's quota. */
  anonymousRateLimit: number;
  /** Failed sign-ins per account and source address before exponential back-off (docs/security.md). */
  loginLockAfter: number;
  /** Failed sign-ins (and failed refreshes) per source address, across accounts, before back-off. */
  loginAddressLockAfter: number;
  /** Failed sign-ins per account, across addresses, before back-off (locks of at most 60 s). */
  loginAccountLockAfter: number;
  /** Longest sign-in lock, in seconds. */
  loginMaxLockSeconds: number;
  /** Proxies whose X-Forwarded-For names the client (Fastify trustProxy: addresses/CIDRs, comma-separated); unset: the socket's peer. */
  trustProxy?: string;
  /** Serve GET /metrics (Prometheus: event-loop delay, process); default true. */
  metrics?: boolean;
  /** When set, GET /metrics asks for `Authorization: Bearer <metricsToken>`. */
  metricsToken?: string;
  /** CIDRs every outbound connection is refused to (egress.ts; `default` stands for the built-in list); unset: that list. */
  egressDeny?: string[];
  /** CIDRs allowed again inside denied ranges (the most specific range decides); unset: none. */
  egressAllow?: string[];
  /** File holding the base64 of the 32-byte master key that seals write-only values at rest (docs/security.md). */
  secretsKeyFile?: string;
  /** The master key itself, base64 (env DP_SECRETS_KEY); without it or the file, a key is generated on first start. */
  secretsKey?: string;
}

/** The SQLite database's file in the data directory. */
export const SQLITE_FILE = 'dataplatform.sqlite';

export const DEFAULT_OPTIONS: Omit<ServiceOptions, 'dataDir'> = {
  host: '127.0.0.1',
  port: 8443,
  rateLimit: 600,
  accessTokenTtl: 3600,
  strictSpec: false,
  bodyLimit: 1024 * 1024,
  logLevel: 'info',
  clock: Date.now,
  timeScale: 1,
  smtpFrom: 'Data Platform <dataplatform@localhost>',
  sourceTimeout: 5,
  sourceQueryTimeout: 300,
  handshakeTimeout: 10,
  headersTimeout: 20,
  requestTimeout: 60,
  keepAliveTimeout: 5,
  maxConnectionsPerAddress: 256,
  maxStreamsPerTenant: 1_000,
  tlsCertCacheSize: 500,
  runHistory: 1_000,
  maxRunsPerTenant: 100,
  maxTenantStorage: 10 * 1024 ** 3,
  auditRetentionDays: 400,
  anonymousRateLimit: 600,
  loginLockAfter: 5,
  loginAddressLockAfter: 20,
  loginAccountLockAfter: 100,
  loginMaxLockSeconds: 900,
};

/** What every route handler can reach. */
export interface ServiceContext {
  options: ServiceOptions;
  db: Db;
  resources: ResourceStore;
  auth: AuthService;
  tenants: TenantStore;
  audit: AuditLog;
  cursors: Cursors;
  /** What this start did to the schema (absent in contexts built by hand in tests). */
  migrations?: MigrationReport;
}

/** An API key reaches its own project (its object and what is in it) or, for tenant-level data, nothing. */
export type KeyReach = 'own-project' | 'never';

/** Per-route settings read by the cross-cutting hooks. */
export interface RouteSettings {
  /** No bearer token needed (login, refresh, invitations, docs). */
  public?: boolean;
  /** Served on any host, no tenant needed (docs). */
  tenantless?: boolean;
  /**
   * With tenantless: not counted either (health probes). Only for answers that cost nothing or are
   * cached: the per-address budget is kept in the database, which a probe must not need.
   */
  unmetered?: boolean;
  /** Open to anonymous clients (login, refresh, SSO): counted per source address, never against the tenant's quota. */
  anonymous?: boolean;
  /**
   * The credential comes in the `token` query parameter (WebSocket streams: browsers cannot set
   * headers on them). It is checked before the tenant's quota is charged, as a bearer token is;
   * a request without one is counted per source address, like an anonymous one.
   */
  queryToken?: boolean;
  permission?: PermissionLevel;
  /** What an API key may reach here; unset means never (see auth/key-reach.ts). */
  keys?: KeyReach;
  /** Recorded in the audit log, success or failure. */
  audit?: { resourceType: string; action: string };
  /** Answers tokens: `Cache-Control: no-store`, so no cache keeps them (RFC 6749, 5.1). */
  noStore?: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    tenant?: Tenant;
    actor?: Actor;
    /** Filled by handlers with what the audit entry should say. */
    auditDetails?: Partial<Pick<AuditEvent, 'projectId' | 'resourceId' | 'resourceName' | 'diff'>> & { actor?: AuditEvent['actor'] };
  }
  interface FastifyContextConfig {
    settings?: RouteSettings;
  }
}
