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

/** A row to write: its columns by name (the caller's object literal is the one list of them). */
export type Row = Record<string, SqlValue>;

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
  private readonly records: GroupCommit<Row>;
  private readonly outbox: GroupCommit<Row>;

  constructor(ctx: ServiceContext) {
    this.channels = new DataLoader((keys) => readChannels(ctx, keys), { cache: false });
    // Every row of a table is made by one object literal, so the first row's keys are all rows' columns.
    const writer = (table: string) => async (rows: Row[]) => {
      const columns = Object.keys(rows[0]);
      await insertRows(
        ctx.db,
        rows.map((row) => columns.map((c) => row[c])),
        (values) => `INSERT INTO ${table} (${columns.join(', ')}) VALUES ${values} ON CONFLICT (id) DO NOTHING`,
      );
    };
    this.records = new GroupCommit(writer('notification_deliveries'));
    this.outbox = new GroupCommit(writer('email_outbox'));
  }

  /** The channel, or undefined when it does not exist (deleted since the alert named it). */
  channel(key: ChannelKey): Promise<StoredResource | undefined> {
    return this.channels.load(key);
  }

  /** Records a delivery (a notification_deliveries row). Resolves once written. */
  record(row: Row): Promise<void> {
    return this.records.add(row);
  }

  /** Queues an email (an email_outbox row). Resolves once written. */
  queueEmail(row: Row): Promise<void> {
    return this.outbox.add(row);
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
