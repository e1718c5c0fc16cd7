import type { FastifyBaseLogger } from 'fastify';
import type { ServiceContext } from './context.js';
import { tenantsStoringAtLeast } from './store/usage.js';
import { formatBytes } from './writes.js';

/** A tenant this close to `--max-tenant-storage` at start is named: its next writes may be refused. */
export const NEAR_LIMIT_SHARE = 0.8;

/**
 * What an operator should hear once at start: the migrations this start applied (an upgrade: the
 * port stays closed while they run), migrations of a newer version (a rollback), and tenants near
 * their storage limit (after an upgrade that brought the limit, some may be past it at once).
 */
export async function logStartState(log: FastifyBaseLogger, ctx: ServiceContext): Promise<void> {
  const report = ctx.migrations;
  if (report?.applied.length) {
    const total = report.applied.reduce((n, m) => n + m.ms, 0);
    log.info(
      { migrations: report.applied },
      `database migrated to schema ${report.applied[report.applied.length - 1].id} in ${(total / 1000).toFixed(1)} s (${report.applied.map((m) => `${m.id}: ${m.ms} ms`).join(', ')})`,
    );
  }
  if (report?.unknown.length)
    log.warn(
      { unknown_migrations: report.unknown },
      `this database was migrated by a newer dpctl (migrations ${report.unknown.join(', ')} are unknown to this version): it runs on that schema, as a rollback does; upgrade again if anything fails (docs/guides/service.md#upgrades-and-rollbacks)`,
    );
  const max = ctx.options.maxTenantStorage;
  if (!max) return;
  for (const t of await tenantsStoringAtLeast(ctx.db, Math.floor(max * NEAR_LIMIT_SHARE)))
    log.warn(
      { tenant: t.slug, bytes: t.bytes, limit: max },
      `tenant ${t.slug} stores ${formatBytes(t.bytes)} of its ${formatBytes(max)} limit (--max-tenant-storage): ${t.bytes >= max ? 'creates and updates that grow it are refused' : 'near it'}`,
    );
}
