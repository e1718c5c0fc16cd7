import DataLoader from 'dataloader';
import { appendTo } from '../../collections.js';
import type { ServiceContext } from '../context.js';
import { insertRows, type SqlValue } from '../store/db.js';
import type { StoredResource } from '../store/resources.js';
import { GroupCommit } from './group-commit.js';

/** A notification channel, by the project it belongs to. */
export interface ChannelKey {
  tenantId: string;
  projectId: string;
  id: string;
}

const DELIVERY_COLUMNS = 'id, tenant_id, project_id, channel_id, event_type, alert_id, status, status_code, attempts, message, created_at';
const OUTBOX_COLUMNS = 'id, tenant_id, project_id, channel_id, recipients, subject, body, created_at';

/**
 * What notification deliveries read and write, a group at a time. A burst of alerts (3,000 connectors
 * going stale together, then their escalations) made three autocommitted statements per delivery: the
 * channel read, the email outbox row, the delivery record; about 1 ms of round trip each on PostgreSQL,
 * on the cores the database shares. Now:
 *
 * - channels asked for in the same turn of the event loop are read together, one statement per
 *   project (DataLoader, with no cache: a channel changed or disabled is seen by the next delivery);
 * - outbox rows and delivery records ending while one write runs go in the next write (GroupCommit),
 *   one multi-row statement each, in the order they ended.
 */
export class NotificationRows {
  private readonly channels: DataLoader<ChannelKey, StoredResource | undefined>;
  private readonly records: GroupCommit<SqlValue[]>;
  private readonly outbox: GroupCommit<SqlValue[]>;

  constructor(ctx: ServiceContext) {
    this.channels = new DataLoader((keys) => readChannels(ctx, keys), { cache: false });
    const writer = (table: string, columns: string) => (rows: SqlValue[][]) =>
      insertRows(ctx.db, rows, (values) => `INSERT INTO ${table} (${columns}) VALUES ${values} ON CONFLICT (id) DO NOTHING`).then(
        () => undefined,
      );
    this.records = new GroupCommit(writer('notification_deliveries', DELIVERY_COLUMNS));
    this.outbox = new GroupCommit(writer('email_outbox', OUTBOX_COLUMNS));
  }

  /** The channel, or undefined when it does not exist (deleted since the alert named it). */
  channel(key: ChannelKey): Promise<StoredResource | undefined> {
    return this.channels.load(key);
  }

  /** Records a delivery: values in DELIVERY_COLUMNS' order. Resolves once written. */
  record(values: SqlValue[]): Promise<void> {
    return this.records.add(values);
  }

  /** Queues an email in the outbox: values in OUTBOX_COLUMNS' order. Resolves once written. */
  queueEmail(values: SqlValue[]): Promise<void> {
    return this.outbox.add(values);
  }
}

async function readChannels(ctx: ServiceContext, keys: readonly ChannelKey[]): Promise<(StoredResource | undefined)[]> {
  const byProject = new Map<string, ChannelKey[]>();
  for (const key of keys) appendTo(byProject, `${key.tenantId}\0${key.projectId}`, key);
  const found = new Map<string, StoredResource>();
  for (const group of byProject.values()) {
    const { tenantId, projectId } = group[0];
    const channels = await ctx.resources.getMany(
      tenantId,
      projectId,
      'notification_channel',
      group.map((k) => k.id),
    );
    for (const [id, channel] of channels) found.set(`${tenantId}\0${projectId}\0${id}`, channel);
  }
  return keys.map((k) => found.get(`${k.tenantId}\0${k.projectId}\0${k.id}`));
}
