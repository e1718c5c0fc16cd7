import type { Db, Queryable } from './db.js';

/**
 * What each tenant stores, in bytes (`tenant_usage`), kept by the database itself: triggers on
 * `resources` (the JSON of each resource and its sealed secrets: what the API stores for it,
 * runs and discovered schemas included) and on `audit_logs` (each entry's diff, plus a fixed
 * AUDIT_ROW_BYTES for its other columns). Every write path is counted, bulk deletes of a project
 * included, without any code in them; the count is exact, in the transaction of the write.
 *
 * What it is for: the disk is shared, and one tenant's read-write key could fill it (1 MiB
 * connectors created and deleted at the rate limit wrote about 1.2 GB a minute, audit entries
 * included), stopping every tenant. Creates and updates that would take a tenant past
 * `--max-tenant-storage` are refused (writes.ts assertStorageRoom); deletes always pass.
 *
 * SQLite's triggers are per row; PostgreSQL's are per statement, over the statement's rows
 * (transition tables), so deleting a project of 100,000 resources updates the usage row once.
 */
export const AUDIT_ROW_BYTES = 200;

const RESOURCE_BYTES = (row: string) => `octet_length(${row}.data) + coalesce(octet_length(${row}.secrets), 0)`;
const AUDIT_BYTES = (row: string) => `${AUDIT_ROW_BYTES} + coalesce(octet_length(${row}.diff), 0)`;

/** SQLite: one trigger per table and operation, each adding the row's bytes to its tenant's. */
function sqliteTriggers(): string[] {
  const add = (bytes: string) =>
    `INSERT INTO tenant_usage (tenant_id, bytes) VALUES (NEW.tenant_id, ${bytes}) ON CONFLICT (tenant_id) DO UPDATE SET bytes = tenant_usage.bytes + excluded.bytes`;
  const sub = (bytes: string) => `UPDATE tenant_usage SET bytes = bytes - (${bytes}) WHERE tenant_id = OLD.tenant_id`;
  return [
    `CREATE TRIGGER tenant_usage_resources_insert AFTER INSERT ON resources BEGIN ${add(RESOURCE_BYTES('NEW'))}; END`,
    `CREATE TRIGGER tenant_usage_resources_update AFTER UPDATE OF data, secrets ON resources BEGIN
       UPDATE tenant_usage SET bytes = bytes + (${RESOURCE_BYTES('NEW')}) - (${RESOURCE_BYTES('OLD')}) WHERE tenant_id = NEW.tenant_id; END`,
    `CREATE TRIGGER tenant_usage_resources_delete AFTER DELETE ON resources BEGIN ${sub(RESOURCE_BYTES('OLD'))}; END`,
    `CREATE TRIGGER tenant_usage_audit_insert AFTER INSERT ON audit_logs BEGIN ${add(AUDIT_BYTES('NEW'))}; END`,
    `CREATE TRIGGER tenant_usage_audit_delete AFTER DELETE ON audit_logs BEGIN ${sub(AUDIT_BYTES('OLD'))}; END`,
  ];
}

/** PostgreSQL: statement triggers summing the statement's rows per tenant. */
function postgresTriggers(): string[] {
  const upsert = (select: string) =>
    `INSERT INTO tenant_usage (tenant_id, bytes) ${select} ON CONFLICT (tenant_id) DO UPDATE SET bytes = tenant_usage.bytes + EXCLUDED.bytes;`;
  const fn = (name: string, body: string) =>
    `CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN ${body} RETURN NULL; END $$`;
  const sum = (sign: string, bytes: string, rows: string) =>
    upsert(`SELECT tenant_id, ${sign}sum(${bytes}) FROM ${rows} AS r GROUP BY tenant_id`);
  const trigger = (name: string, op: string, table: string, tables: string, func: string) =>
    `CREATE TRIGGER ${name} AFTER ${op} ON ${table} REFERENCING ${tables} FOR EACH STATEMENT EXECUTE FUNCTION ${func}()`;
  return [
    fn(
      'tenant_usage_added',
      `IF TG_TABLE_NAME = 'resources' THEN ${sum('', RESOURCE_BYTES('r'), 'new_rows')} ELSE ${sum('', AUDIT_BYTES('r'), 'new_rows')} END IF;`,
    ),
    fn(
      'tenant_usage_removed',
      `IF TG_TABLE_NAME = 'resources' THEN ${sum('-', RESOURCE_BYTES('r'), 'old_rows')} ELSE ${sum('-', AUDIT_BYTES('r'), 'old_rows')} END IF;`,
    ),
    fn(
      'tenant_usage_changed',
      upsert(
        `SELECT n.tenant_id, sum((${RESOURCE_BYTES('n')}) - (${RESOURCE_BYTES('o')})) FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id GROUP BY n.tenant_id`,
      ),
    ),
    trigger('tenant_usage_resources_insert', 'INSERT', 'resources', 'NEW TABLE AS new_rows', 'tenant_usage_added'),
    trigger('tenant_usage_resources_update', 'UPDATE', 'resources', 'OLD TABLE AS old_rows NEW TABLE AS new_rows', 'tenant_usage_changed'),
    trigger('tenant_usage_resources_delete', 'DELETE', 'resources', 'OLD TABLE AS old_rows', 'tenant_usage_removed'),
    trigger('tenant_usage_audit_insert', 'INSERT', 'audit_logs', 'NEW TABLE AS new_rows', 'tenant_usage_added'),
    trigger('tenant_usage_audit_delete', 'DELETE', 'audit_logs', 'OLD TABLE AS old_rows', 'tenant_usage_removed'),
  ];
}

/**
 * PostgreSQL: no write to the counted tables commits between the count and the triggers (or during a
 * recount). Without it, a write another replica (an older version, in a rolling upgrade) committed
 * meanwhile was in neither, and its bytes were wrong for ever: a 30,000-connector project deleted
 * during migration 14 left 26 MB counted. Writers wait for the count (about 0.6 s at 100,000
 * resources and 130,000 audit entries). SQLite has one writer: the migration's own transaction.
 */
async function holdWriters(q: Queryable, dialect: Db['dialect']): Promise<void> {
  if (dialect === 'postgres') await q.run('LOCK TABLE resources, audit_logs IN SHARE ROW EXCLUSIVE MODE');
}

/** Each tenant's bytes as stored now, into an empty `tenant_usage`. */
async function countStored(q: Queryable): Promise<void> {
  await q.run(
    `INSERT INTO tenant_usage (tenant_id, bytes) SELECT tenant_id, sum(bytes) FROM (
       SELECT tenant_id, ${RESOURCE_BYTES('resources')} AS bytes FROM resources
       UNION ALL SELECT tenant_id, ${AUDIT_BYTES('audit_logs')} AS bytes FROM audit_logs) AS stored GROUP BY tenant_id`,
  );
}

/** Migration 14's fill: what is stored already, then the triggers that keep the count from now on. */
export async function installUsageAccounting(q: Queryable, dialect: Db['dialect']): Promise<void> {
  await holdWriters(q, dialect);
  await countStored(q);
  for (const statement of dialect === 'sqlite' ? sqliteTriggers() : postgresTriggers()) await q.run(statement);
}

/** Migration 16's fill: the count again, for databases migration 14 counted while another replica wrote. */
export async function recountUsage(q: Queryable, dialect: Db['dialect']): Promise<void> {
  await holdWriters(q, dialect);
  await q.run('DELETE FROM tenant_usage');
  await countStored(q);
}

/** The bytes a tenant stores now (0 before its first write). */
export async function tenantUsage(q: Queryable, tenantId: string): Promise<number> {
  const row = await q.get<{ bytes: number | string }>('SELECT bytes FROM tenant_usage WHERE tenant_id = ?', [tenantId]);
  return row ? Number(row.bytes) : 0;
}

/** Tenants storing at least `bytes` (at most 20, largest first), for the start-up warning of who is near the limit. */
export async function tenantsStoringAtLeast(q: Queryable, bytes: number): Promise<{ slug: string; bytes: number }[]> {
  const rows = await q.all<{ slug: string; bytes: number | string }>(
    'SELECT t.slug, u.bytes FROM tenant_usage u JOIN tenants t ON t.id = u.tenant_id WHERE u.bytes >= ? ORDER BY u.bytes DESC LIMIT 20',
    [bytes],
  );
  return rows.map((r) => ({ slug: r.slug, bytes: Number(r.bytes) }));
}
