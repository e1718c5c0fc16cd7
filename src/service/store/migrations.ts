import type { Db, Queryable } from './db.js';
import { backfillRefs } from './refs.js';
import { LARGE_ITEM_BYTES } from './large-scopes.js';
import { installUsageAccounting, recountUsage } from './usage.js';

/**
 * The one migration set. `{{SERIAL}}` is the auto-increment primary key of each dialect, and
 * `{{FRESHNESS_RULE}}` the condition of freshnessRuleCondition. Append new migrations; never edit
 * one that has shipped.
 */
interface Migration {
  id: number;
  sql: string;
  /** Rows the new tables need for data written before them, in the migration's transaction. */
  fill?: (q: Queryable, dialect: Db['dialect']) => Promise<void>;
  /**
   * Its statements are index builds alone (`CREATE INDEX name ON ...`). On PostgreSQL each is built
   * CONCURRENTLY, outside a transaction: in a rolling upgrade the older replicas go on writing while
   * it builds, where a plain build holds every write to the table for the whole build (minutes on an
   * audit table of millions of rows). A build interrupted half-way leaves an invalid index, which the
   * next start drops and builds again. Marking a shipped migration online changes how its indexes are
   * built, never what they are.
   */
  online?: true;
}

const MIGRATIONS: Migration[] = [
  {
    id: 1,
    sql: `
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE tenants (id TEXT PRIMARY KEY, slug TEXT NOT NULL UNIQUE, name TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE resources (
  seq {{SERIAL}},
  id TEXT NOT NULL UNIQUE,
  tenant_id TEXT NOT NULL,
  project_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  parent_id TEXT NOT NULL DEFAULT '',
  name TEXT NOT NULL,
  data TEXT NOT NULL,
  secrets TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX resources_identity ON resources (tenant_id, project_id, kind, name);
CREATE INDEX resources_listing ON resources (tenant_id, project_id, kind, parent_id, seq);
CREATE TABLE user_credentials (
  user_id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  password_hash TEXT,
  invitation_hash TEXT UNIQUE,
  invitation_expires_at TEXT
);
CREATE TABLE api_key_hashes (
  hash TEXT PRIMARY KEY,
  api_key_id TEXT NOT NULL UNIQUE,
  tenant_id TEXT NOT NULL,
  project_id TEXT NOT NULL,
  permission_level TEXT NOT NULL
);
CREATE TABLE sessions (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, user_id TEXT NOT NULL, created_at TEXT NOT NULL, revoked_at TEXT);
CREATE INDEX sessions_user ON sessions (user_id);
CREATE TABLE refresh_tokens (hash TEXT PRIMARY KEY, session_id TEXT NOT NULL, expires_at TEXT NOT NULL, used_at TEXT);
CREATE TABLE access_tokens (hash TEXT PRIMARY KEY, session_id TEXT NOT NULL, expires_at TEXT NOT NULL);
CREATE INDEX access_tokens_session ON access_tokens (session_id);
CREATE TABLE rate_counters (tenant_id TEXT NOT NULL, endpoint TEXT NOT NULL, window_start BIGINT NOT NULL, count BIGINT NOT NULL, PRIMARY KEY (tenant_id, endpoint, window_start));
CREATE TABLE audit_logs (
  seq {{SERIAL}},
  id TEXT NOT NULL UNIQUE,
  tenant_id TEXT NOT NULL,
  project_id TEXT,
  ts TEXT NOT NULL,
  actor_type TEXT NOT NULL,
  actor_id TEXT,
  actor_name TEXT,
  action TEXT NOT NULL,
  resource_type TEXT NOT NULL,
  resource_id TEXT,
  resource_name TEXT,
  request_id TEXT NOT NULL,
  outcome TEXT NOT NULL,
  status_code INTEGER NOT NULL,
  diff TEXT
);
CREATE INDEX audit_logs_listing ON audit_logs (tenant_id, project_id, seq);
`,
  },
  {
    // Plain lists do not filter on parent_id, so they need an index without it.
    id: 2,
    online: true,
    sql: `CREATE INDEX resources_kind_seq ON resources (tenant_id, project_id, kind, seq);`,
  },
  {
    // Schedules, alerting and notifications (src/service/runtime/scheduler.ts, alerts.ts, notifications.ts, escalation.ts).
    // schedule_ticks: one row per (resource, cron tick), claimed with INSERT ... ON CONFLICT DO NOTHING, so of
    // several replicas only the inserter starts the run. alert_escalations: the same claim per (alert, escalation step).
    id: 3,
    sql: `
CREATE TABLE schedule_ticks (
  resource_id TEXT NOT NULL,
  tick TEXT NOT NULL,
  tenant_id TEXT NOT NULL,
  project_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  instance_id TEXT NOT NULL,
  outcome TEXT NOT NULL,
  run_id TEXT,
  detail TEXT,
  claimed_at TEXT NOT NULL,
  PRIMARY KEY (resource_id, tick)
);
CREATE TABLE alert_escalations (
  alert_id TEXT NOT NULL,
  step_key TEXT NOT NULL,
  tenant_id TEXT NOT NULL,
  notified_at TEXT NOT NULL,
  PRIMARY KEY (alert_id, step_key)
);
CREATE TABLE notification_deliveries (
  seq {{SERIAL}},
  id TEXT NOT NULL UNIQUE,
  tenant_id TEXT NOT NULL,
  project_id TEXT NOT NULL,
  channel_id TEXT NOT NULL,
  event_type TEXT NOT NULL,
  alert_id TEXT,
  status TEXT NOT NULL,
  status_code INTEGER,
  attempts INTEGER NOT NULL,
  message TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX notification_deliveries_channel ON notification_deliveries (tenant_id, channel_id, seq);
CREATE TABLE email_outbox (
  seq {{SERIAL}},
  id TEXT NOT NULL UNIQUE,
  tenant_id TEXT NOT NULL,
  project_id TEXT NOT NULL,
  channel_id TEXT NOT NULL,
  recipients TEXT NOT NULL,
  subject TEXT NOT NULL,
  body TEXT NOT NULL,
  created_at TEXT NOT NULL
);
`,
  },
  {
    // Single sign-on (src/service/sso/). sso_flows: one row per browser sign-in in progress, keyed by the
    // hash of its state, so any replica can finish a flow another started; claimed (deleted) once.
    // sso_identities: which user an IdP subject signed in as, so an SSO-only user counts as active.
    id: 4,
    sql: `
CREATE TABLE sso_flows (
  state_hash TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  provider_id TEXT NOT NULL,
  nonce TEXT,
  code_verifier TEXT,
  request_id TEXT,
  redirect_uri TEXT NOT NULL,
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL
);
CREATE INDEX sso_flows_expiry ON sso_flows (expires_at);
CREATE TABLE sso_identities (
  provider_id TEXT NOT NULL,
  subject TEXT NOT NULL,
  tenant_id TEXT NOT NULL,
  user_id TEXT NOT NULL,
  email TEXT NOT NULL,
  last_login_at TEXT NOT NULL,
  PRIMARY KEY (provider_id, subject)
);
CREATE INDEX sso_identities_user ON sso_identities (user_id);
`,
  },
  {
    // Failed sign-in throttle (src/service/auth/login-throttle.ts): one row per hashed key (account and
    // address, address, account), times in epoch milliseconds; expired rows are deleted via the index.
    id: 5,
    sql: `
CREATE TABLE login_throttle (key TEXT PRIMARY KEY, failures INTEGER NOT NULL, locked_until BIGINT NOT NULL, attempt_id TEXT NOT NULL, expires_at BIGINT NOT NULL);
CREATE INDEX login_throttle_expiry ON login_throttle (expires_at);
`,
  },
  {
    // Due times of cron schedules (src/service/store/schedules.ts, runtime/scheduler.ts): one row per scheduled
    // resource, times in epoch milliseconds; the scheduler reads only the due rows through schedules_due.
    // Rows of resources written before this migration are back-filled by the scheduler, in batches, on start.
    id: 6,
    sql: `
CREATE TABLE schedules (
  resource_id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  project_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  expression TEXT NOT NULL,
  tick BIGINT NOT NULL,
  offset_ms BIGINT NOT NULL,
  next_due_at BIGINT NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_due_at);
CREATE INDEX schedules_project ON schedules (tenant_id, project_id);
`,
  },
  {
    // Alerting without scans (src/service/runtime/alerts.ts, escalation.ts). open_alerts: the one firing or
    // acknowledged alert of a (rule, resource), claimed on insert across replicas ('' for no resource); a row
    // whose alert was resolved or deleted is taken over by the next alert. escalations_due: when a firing alert
    // with an escalation policy next needs a look (epoch ms). resources_kind: background work (freshness
    // rules, back-fills) pages one kind across tenants by seq without reading the others. audit_logs_tenant: the
    // tenant-wide audit log in seq order without sorting every project's entries.
    // Rows for alerts fired before this migration are back-filled once on start (runtime/backfill.ts).
    id: 7,
    sql: `
CREATE TABLE open_alerts (rule_id TEXT NOT NULL, resource_key TEXT NOT NULL, alert_id TEXT NOT NULL, tenant_id TEXT NOT NULL, PRIMARY KEY (rule_id, resource_key));
CREATE TABLE escalations_due (alert_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, next_due_at BIGINT NOT NULL);
CREATE INDEX escalations_due_at ON escalations_due (next_due_at);
CREATE INDEX resources_kind ON resources (kind, seq);
CREATE INDEX audit_logs_tenant ON audit_logs (tenant_id, seq);
`,
  },
  {
    // Which resource names which (src/service/store/refs.ts): a delete asks whether its resource is
    // still used with one lookup on resource_refs_target instead of reading every referring resource
    // of the project. Filled from the resources already stored in the same transaction.
    id: 8,
    sql: `
CREATE TABLE resource_refs (
  tenant_id TEXT NOT NULL,
  project_id TEXT NOT NULL,
  target_id TEXT NOT NULL,
  referrer_id TEXT NOT NULL,
  referrer_kind TEXT NOT NULL,
  path TEXT NOT NULL,
  PRIMARY KEY (referrer_id, path)
);
CREATE INDEX resource_refs_target ON resource_refs (tenant_id, project_id, target_id);
`,
    fill: backfillRefs,
  },
  {
    // Rows swept once old (src/service/runtime/retention.ts): schedule claims a day after their claim,
    // tokens a day after they expire, found through these indexes a batch at a time.
    id: 9,
    online: true,
    sql: `
CREATE INDEX schedule_ticks_claimed ON schedule_ticks (claimed_at);
CREATE INDEX access_tokens_expiry ON access_tokens (expires_at);
CREATE INDEX refresh_tokens_expiry ON refresh_tokens (expires_at);
`,
  },
  {
    // A session goes with its last refresh token (runtime/retention.ts): finding whether one is left.
    id: 10,
    online: true,
    sql: `CREATE INDEX refresh_tokens_session ON refresh_tokens (session_id);`,
  },
  {
    // The scheduler's minute look at freshness rules (runtime/scheduler.ts) reads these rows only: it
    // used to walk every alert rule of every tenant, the others filtered out one by one.
    id: 11,
    online: true,
    sql: `CREATE INDEX resources_freshness_rules ON resources (seq) WHERE {{FRESHNESS_RULE}};`,
  },
  {
    // Scopes holding a resource over 64 KiB, whose list pages also end at a number of bytes
    // (store/large-scopes.ts); filled from the resources stored before it.
    id: 12,
    sql: `CREATE TABLE large_scopes (tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, kind TEXT NOT NULL, PRIMARY KEY (tenant_id, project_id, kind));
INSERT INTO large_scopes (tenant_id, project_id, kind) SELECT DISTINCT tenant_id, project_id, kind FROM resources WHERE octet_length(data) > ${LARGE_ITEM_BYTES};`,
  },
  {
    // Notifications of alerts and escalations waiting to be sent (runtime/notification-queue.ts),
    // queued in the transaction that fires or escalates: an event and its channels (channel_ids, a JSON
    // array; fanout, their number). due_at (epoch ms) moves past a lease when a replica claims the
    // row. A tenant's rows are claimed in order through the index.
    id: 13,
    sql: `
CREATE TABLE notification_queue (
  seq {{SERIAL}},
  id TEXT NOT NULL UNIQUE,
  tenant_id TEXT NOT NULL,
  project_id TEXT NOT NULL,
  channel_ids TEXT NOT NULL,
  fanout INTEGER NOT NULL,
  event TEXT NOT NULL,
  due_at BIGINT NOT NULL
);
CREATE INDEX notification_queue_tenant ON notification_queue (tenant_id, due_at, seq);
`,
  },
  {
    // Bytes each tenant stores (store/usage.ts: kept by triggers, which the fill installs after
    // counting what is stored), for --max-tenant-storage; audit entries swept by age
    // (runtime/retention.ts, --audit-retention) through the time index.
    id: 14,
    sql: `CREATE TABLE tenant_usage (tenant_id TEXT PRIMARY KEY, bytes BIGINT NOT NULL);
CREATE INDEX audit_logs_ts ON audit_logs (ts);`,
    fill: installUsageAccounting,
  },
  {
    // One resource's audit entries in order (routes/audit-logs.ts, resource_id).
    id: 15,
    online: true,
    sql: `CREATE INDEX audit_logs_resource ON audit_logs (tenant_id, resource_id, seq);`,
  },
  {
    // Migration 14 counted without holding writers off (PostgreSQL): an older replica's write that
    // committed between its count and its triggers was counted wrong for ever. Counted again, held.
    id: 16,
    sql: '',
    fill: recountUsage,
  },
  {
    // The scheduler's look tenant by tenant while one tenant's queue is full (runtime/scheduler.ts
    // dueByTenant): a tenant's earliest due time and its due rows without reading another tenant's.
    id: 17,
    online: true,
    sql: `CREATE INDEX schedules_tenant_due ON schedules (tenant_id, next_due_at);`,
  },
];

/**
 * The alert rules whose metric is freshness_minutes, as SQL on `resources`: the partial index of
 * migration 11 serves a query that states exactly this condition.
 */
export function freshnessRuleCondition(dialect: Db['dialect']): string {
  const metric = dialect === 'sqlite' ? `json_extract(data, '$.condition.metric')` : `((data::jsonb) -> 'condition' ->> 'metric')`;
  return `kind = 'alert_rule' AND ${metric} = 'freshness_minutes'`;
}

/** What a start did to the schema: the migrations it applied (with how long each took), and ids this version does not know. */
export interface MigrationReport {
  applied: { id: number; ms: number }[];
  /** Migrations of a newer version (a rollback): this one runs on their schema without knowing it. */
  unknown: number[];
}

export async function migrate(db: Db): Promise<MigrationReport> {
  const serial = db.dialect === 'sqlite' ? 'INTEGER PRIMARY KEY AUTOINCREMENT' : 'BIGSERIAL PRIMARY KEY';
  const report: MigrationReport = { applied: [], unknown: [] };
  await db.exclusive(async () => {
    await db.run('CREATE TABLE IF NOT EXISTS schema_migrations (id INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)');
    const done = new Set((await db.all<{ id: number }>('SELECT id FROM schema_migrations')).map((r) => Number(r.id)));
    const known = new Set(MIGRATIONS.map((m) => m.id));
    report.unknown = [...done].filter((id) => !known.has(id)).sort((a, b) => a - b);
    for (const migration of MIGRATIONS) {
      if (done.has(migration.id)) continue;
      const started = performance.now();
      const statements = migration.sql
        .replaceAll('{{SERIAL}}', serial)
        .replaceAll('{{FRESHNESS_RULE}}', freshnessRuleCondition(db.dialect))
        .split(';')
        .map((s) => s.trim())
        .filter(Boolean);
      const record = (q: Queryable) =>
        q.run('INSERT INTO schema_migrations (id, applied_at) VALUES (?, ?)', [migration.id, new Date().toISOString()]);
      if (migration.online && db.dialect === 'postgres') {
        for (const statement of statements) await buildIndexOnline(db, statement);
        await record(db);
      } else
        await db.tx(async (q) => {
          for (const statement of statements) await q.run(statement);
          await migration.fill?.(q, db.dialect);
          await record(q);
        });
      report.applied.push({ id: migration.id, ms: Math.round(performance.now() - started) });
    }
  });
  return report;
}

/**
 * One index of an online migration, built without holding writers off (PostgreSQL): CONCURRENTLY,
 * outside a transaction. An index of that name left by an earlier start is kept when valid (built,
 * but the start stopped before recording the migration) and dropped first when not (its build was
 * interrupted: PostgreSQL leaves such an index behind, invalid, and would refuse the name).
 */
async function buildIndexOnline(db: Db, statement: string): Promise<void> {
  const name = /^CREATE INDEX (\w+) ON /i.exec(statement)?.[1];
  if (!name) throw new Error(`an online migration builds indexes alone, not: ${statement}`);
  const left = await db.get<{ valid: boolean }>(
    `SELECT i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
     WHERE c.relname = ? AND c.relnamespace = current_schema()::regnamespace`,
    [name],
  );
  if (left?.valid) return;
  if (left) await db.run(`DROP INDEX CONCURRENTLY ${name}`);
  await db.run(statement.replace(/^CREATE INDEX/i, 'CREATE INDEX CONCURRENTLY'));
}
