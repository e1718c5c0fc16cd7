import { insertRows, padToBucket, paramList, type Queryable } from '../store/db.js';
import { newId } from '../ids.js';
import type { Runtime } from './runtime.js';
import { deliver, type NotificationEvent } from './notifications.js';
import { GroupCommit } from './group-commit.js';
import { yieldToLoop } from './slices.js';

/** One notification to send: an event to channels of a project (a rule's, an escalation step's). */
export interface QueuedNotification {
  tenantId: string;
  projectId: string;
  channelIds: readonly string[];
  event: NotificationEvent;
}

interface QueueRow {
  id: string;
  tenant_id: string;
  project_id: string;
  /** JSON array of channel ids. */
  channel_ids: string;
  fanout: number;
  event: string;
}

/** Rows claimed per statement. */
const CLAIM_BATCH = 100;
/** Ids deleted per statement once sent. */
const DELETE_BATCH = 1_024;
/**
 * Deliveries (a row's channels each) of one tenant taken from the queue and not yet done; past it the
 * tenant's rows wait in the table. Under the deliveries gate's 8 running + 1,000 waiting
 * (Runtime.deliveries), so a burst is sent in turn instead of being refused past the gate. At least
 * the 50 channels a rule or a step may name, so any row fits once the tenant has nothing in flight.
 */
const IN_FLIGHT_PER_TENANT = 256;
/**
 * How long a claimed row is this replica's: past it (the replica died mid-delivery) the row is due
 * again and any replica sends it. Longer than IN_FLIGHT_PER_TENANT deliveries take 8 at a time
 * against a receiver that times out every attempt (256 / 8 x 16 s = 8.5 minutes).
 */
export const CLAIM_LEASE_MS = 15 * 60_000;

/**
 * Notifications of alerts and escalations, sent from a table (`notification_queue`, migration 13)
 * rather than from memory. A row is one event and the channels it goes to (a fired alert's rule's,
 * an escalation step's: at most 50), so the rows queued are as many as the alerts fired and the steps
 * claimed, not times their channels:
 *
 * - they are queued in the transaction that fires the alert or claims the escalation step, so a
 *   service that stops or crashes before sending sends them after (at least once: a delivery cut
 *   short is sent again when its claim lapses);
 * - a burst (3,000 alerts of one tenant to a webhook) goes out IN_FLIGHT_PER_TENANT at a time per
 *   tenant, in order, the rest waiting in the table: from memory, past the deliveries gate's 1,008
 *   waiting a delivery was recorded failed;
 * - replicas share the table: a row is claimed by moving its due time past the lease
 *   (`UPDATE ... WHERE due_at <= now RETURNING`), so one replica sends it.
 *
 * A pass finds the tenants with queued rows (a skip over the tenant index: a statement per tenant,
 * not per row) and claims each one's due rows in order, up to its room, through the (tenant_id,
 * due_at, seq) index: one tenant's backlog is never scanned for another's rows. A pass runs when
 * this process queues something (kick), when a full tenant's deliveries are half done, and on every
 * scheduler look (rows of other replicas, lapsed claims).
 */
export class NotificationQueue {
  private readonly inFlight = new Map<string, number>();
  private readonly done: GroupCommit<string>;
  private pass?: Promise<void>;
  private again = false;
  private stopped = false;

  constructor(
    private readonly rt: Runtime,
    private readonly track: <T>(p: Promise<T>) => Promise<T>,
  ) {
    this.done = new GroupCommit(async (ids) => {
      for (let start = 0; start < ids.length; start += DELETE_BATCH) {
        const batch = padToBucket(ids.slice(start, start + DELETE_BATCH));
        await rt.ctx.db.run(`DELETE FROM notification_queue WHERE id IN (${paramList(batch.length)})`, batch);
      }
    });
  }

  /** Queues notifications in the caller's transaction. Call kick() once it has committed. */
  async enqueue(q: Queryable, items: readonly QueuedNotification[]): Promise<void> {
    const dueAt = this.rt.nowMs();
    await insertRows(
      q,
      items
        .filter((n) => n.channelIds.length)
        .map((n) => [
          newId('ntf'),
          n.tenantId,
          n.projectId,
          JSON.stringify(n.channelIds),
          n.channelIds.length,
          JSON.stringify(n.event),
          dueAt,
        ]),
      (values) =>
        `INSERT INTO notification_queue (id, tenant_id, project_id, channel_ids, fanout, event, due_at) VALUES ${values} ON CONFLICT (id) DO NOTHING`,
    );
  }

  /** Starts a pass over what is due (or another one after the running pass), tracked for idle(). */
  kick(): void {
    if (this.stopped) return;
    if (this.pass) {
      this.again = true;
      return;
    }
    this.pass = this.track(this.drain()).finally(() => (this.pass = undefined));
  }

  /** A pass, and the passes kicked while it ran; resolves when they are done (not their deliveries). */
  async dispatch(): Promise<void> {
    this.kick();
    await this.pass;
  }

  /** No pass starts after this; deliveries under way end (the caller waits for them with idle()). */
  stop(): void {
    this.stopped = true;
  }

  private async drain(): Promise<void> {
    do {
      this.again = false;
      for (const tenantId of await this.tenantsQueued()) {
        if (this.stopped) return;
        await this.claimFor(tenantId);
      }
    } while (this.again && !this.stopped);
  }

  /** The tenants with rows in the queue: one index probe per tenant (a loose index scan), whatever the rows. */
  private async tenantsQueued(): Promise<string[]> {
    const rows = await this.rt.ctx.db.all<{ tenant_id: string }>(
      `WITH RECURSIVE t(tenant_id) AS (
        SELECT MIN(tenant_id) FROM notification_queue
        UNION ALL
        SELECT (SELECT MIN(tenant_id) FROM notification_queue WHERE tenant_id > t.tenant_id) FROM t WHERE t.tenant_id IS NOT NULL
      ) SELECT tenant_id FROM t WHERE tenant_id IS NOT NULL`,
    );
    return rows.map((r) => r.tenant_id);
  }

  /**
   * Claims a tenant's due rows, oldest first, as many as its room holds (the running sum of their
   * channels, over its first CLAIM_BATCH due rows only: never its whole backlog), and starts their
   * deliveries.
   */
  private async claimFor(tenantId: string): Promise<void> {
    for (;;) {
      const room = IN_FLIGHT_PER_TENANT - (this.inFlight.get(tenantId) ?? 0);
      if (room <= 0 || this.stopped) return;
      const now = this.rt.nowMs();
      const rows = await this.rt.ctx.db.all<QueueRow>(
        `UPDATE notification_queue SET due_at = ? WHERE id IN (
          SELECT id FROM (
            SELECT id, SUM(fanout) OVER (ORDER BY due_at, seq) AS upto FROM (
              SELECT id, fanout, due_at, seq FROM notification_queue
              WHERE tenant_id = ? AND due_at <= ? ORDER BY due_at, seq LIMIT ${CLAIM_BATCH}
            ) AS head
          ) AS next WHERE upto <= ?
        ) AND due_at <= ? RETURNING id, tenant_id, project_id, channel_ids, fanout, event`,
        [now + CLAIM_LEASE_MS, tenantId, now, room, now],
      );
      if (!rows.length) return;
      for (const row of rows) {
        this.inFlight.set(tenantId, (this.inFlight.get(tenantId) ?? 0) + Number(row.fanout));
        void this.track(this.send(row));
      }
      await yieldToLoop();
    }
  }

  /** Sends a row's event to each of its channels, then deletes the row. */
  private async send(row: QueueRow): Promise<void> {
    const { tenant_id: tenantId, project_id: projectId } = row;
    try {
      const event = JSON.parse(row.event) as NotificationEvent;
      await Promise.all(
        (JSON.parse(row.channel_ids) as string[]).map(async (id) => {
          const channel = await this.rt.notificationRows.channel({ tenantId, projectId, id });
          // A channel deleted or disabled since it was queued: nothing to send, as when the alert fired.
          if (channel && channel.data.enabled !== false) await deliver(this.rt, channel, event);
        }),
      );
      await this.done.add(row.id);
    } finally {
      const before = this.inFlight.get(tenantId) ?? 0;
      const left = before - Number(row.fanout);
      if (left > 0) this.inFlight.set(tenantId, left);
      else this.inFlight.delete(tenantId);
      // A full tenant half done: its rows waiting in the table go next.
      const half = IN_FLIGHT_PER_TENANT / 2;
      if (before > half && left <= half) this.kick();
    }
  }
}
