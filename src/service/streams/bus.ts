import { EventEmitter } from 'node:events';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { ServiceContext } from '../context.js';
import type { RevokedCredentials } from '../auth/actor.js';

/**
 * One event for the WebSocket streams. `message` is exactly what subscribers are sent;
 * the other fields only route it (tenant, and the pipeline run or the project).
 *
 * A step_update with a `seq` describes a change that may not be stored yet; `run_stored` says
 * that every step_update of that run numbered up to its `seq` now is (RunRecorder.announce).
 * It travels the same way, after them, and is never sent to a subscriber.
 */
export type StreamEvent =
  | { kind: 'step_update'; tenantId: string; pipelineId: string; runId: string; seq?: number; message: Record<string, unknown> }
  | { kind: 'run_stored'; tenantId: string; pipelineId: string; runId: string; seq: number }
  | { kind: 'alert'; tenantId: string; projectId: string; message: Record<string, unknown> }
  /** Credentials revoked or changed by a committed write: connections using them are checked again at once. */
  | ({ kind: 'revoked'; tenantId: string } & RevokedCredentials);

export interface EventBus {
  /** Delivers to the subscribers of this process at once and, on PostgreSQL, of every other replica. */
  publish(event: StreamEvent): void;
  subscribe(fn: (event: StreamEvent) => void): () => void;
  close(): Promise<void>;
}

/** NOTIFY payloads must stay under PostgreSQL's 8000-byte limit; bigger events travel by reference. */
export const NOTIFY_LIMIT = 7900;
export const CHANNEL = 'dp_streams';
/** Events too big for a NOTIFY payload are kept this long for the other replicas to re-read. */
const SPILL_TTL_MS = 5 * 60_000;

/** In-process fan-out: the whole bus on SQLite (one process owns the store). */
class LocalBus implements EventBus {
  protected readonly emitter = new EventEmitter();
  constructor() {
    this.emitter.setMaxListeners(0);
  }
  publish(event: StreamEvent): void {
    this.deliver(event);
  }
  protected deliver(event: StreamEvent): void {
    this.emitter.emit('event', event);
  }
  subscribe(fn: (event: StreamEvent) => void): () => void {
    const listener = (e: StreamEvent) => {
      try {
        fn(e);
      } catch {
        // one subscriber's failure never stops the others
      }
    };
    this.emitter.on('event', listener);
    return () => this.emitter.off('event', listener);
  }
  async close(): Promise<void> {
    this.emitter.removeAllListeners();
  }
}

interface Envelope {
  /** The replica that published: it delivered locally already and ignores its own notification. */
  o: string;
  /** The event itself, or a reference (`r`) to a row of stream_spill when it is too big. */
  e?: StreamEvent;
  r?: string;
}

type Log = { warn(obj: object, msg: string): void; error(obj: object, msg: string): void };

/**
 * PostgreSQL: local subscribers get an event at once; other replicas get it through
 * `NOTIFY dp_streams, <json>` on one dedicated connection per replica, which also LISTENs.
 * One connection keeps this replica's notifications in publish order.
 */
class PostgresBus extends LocalBus {
  private readonly origin = `bus_${randomBytes(9).toString('base64url')}`;
  private client?: pg.Client;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;
  private reconnectTimer?: NodeJS.Timeout;

  constructor(
    private readonly url: string,
    private readonly log?: Log,
  ) {
    super();
  }

  async start(): Promise<void> {
    const setup = new pg.Client({ connectionString: this.url });
    await setup.connect();
    try {
      await setup.query('CREATE TABLE IF NOT EXISTS stream_spill (id TEXT PRIMARY KEY, payload TEXT NOT NULL, created_at BIGINT NOT NULL)');
    } catch (err) {
      // Two replicas creating it at the same moment: one wins, which is all we need.
      if (!/already exists|duplicate key/i.test((err as Error).message)) throw err;
    } finally {
      await setup.end();
    }
    await this.connect();
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url });
    client.on('notification', (n) => {
      if (n.channel === CHANNEL && n.payload) void this.received(n.payload);
    });
    client.on('error', (err) => {
      this.log?.warn({ err }, 'stream bus connection failed; reconnecting');
      this.reconnect(client);
    });
    client.on('end', () => this.reconnect(client));
    await client.connect();
    await client.query(`LISTEN ${CHANNEL}`);
    this.client = client;
  }

  private reconnect(dead: pg.Client) {
    if (this.closed || this.client !== dead) return;
    this.client = undefined;
    dead.end().catch(() => undefined);
    this.retry();
  }

  private retry() {
    if (this.closed) return;
    this.reconnectTimer = setTimeout(() => {
      this.connect().catch((err) => {
        this.log?.warn({ err }, 'stream bus reconnect failed; retrying');
        this.retry();
      });
    }, 1000);
    this.reconnectTimer.unref();
  }

  private async received(payload: string): Promise<void> {
    try {
      const env = JSON.parse(payload) as Envelope;
      if (env.o === this.origin) return;
      let event = env.e;
      if (!event && env.r) {
        const row = await this.client?.query<{ payload: string }>('SELECT payload FROM stream_spill WHERE id = $1', [env.r]);
        if (!row?.rows[0]) return;
        event = JSON.parse(row.rows[0].payload) as StreamEvent;
      }
      if (event) this.deliver(event);
    } catch (err) {
      this.log?.warn({ err }, 'stream bus could not read a notification');
    }
  }

  publish(event: StreamEvent): void {
    this.deliver(event);
    if (this.closed) return;
    const json = JSON.stringify({ o: this.origin, e: event } satisfies Envelope);
    // Serialised: each NOTIFY goes out after the previous one, so order is kept across replicas.
    this.queue = this.queue
      .then(async () => {
        const client = this.client;
        if (!client) return;
        if (Buffer.byteLength(json) <= NOTIFY_LIMIT) {
          await client.query('SELECT pg_notify($1, $2)', [CHANNEL, json]);
          return;
        }
        const id = `spill_${randomBytes(12).toString('base64url')}`;
        const now = Date.now();
        await client.query('INSERT INTO stream_spill (id, payload, created_at) VALUES ($1, $2, $3)', [id, JSON.stringify(event), now]);
        await client.query('DELETE FROM stream_spill WHERE created_at < $1', [now - SPILL_TTL_MS]);
        await client.query('SELECT pg_notify($1, $2)', [CHANNEL, JSON.stringify({ o: this.origin, r: id } satisfies Envelope)]);
      })
      .catch((err) => this.log?.error({ err }, 'stream bus could not publish'));
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    await this.queue;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
    await super.close();
  }
}

/** The bus of a service: in-process on SQLite, LISTEN/NOTIFY across replicas on PostgreSQL. */
export async function createEventBus(ctx: ServiceContext, log?: Log): Promise<EventBus> {
  if (ctx.db.dialect !== 'postgres' || !ctx.options.databaseUrl) return new LocalBus();
  const bus = new PostgresBus(ctx.options.databaseUrl, log);
  await bus.start();
  return bus;
}
