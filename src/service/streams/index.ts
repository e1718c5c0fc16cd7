import { createRequire } from 'node:module';
import type { FastifyInstance, FastifyPluginCallback, FastifyRequest, RouteOptions } from 'fastify';
import type { ServerOptions, WebSocket } from 'ws';
import type { ServiceContext } from '../context.js';
import type { Actor } from '../auth/actor.js';
import { ApiError, notFound, unauthorized } from '../errors.js';
import { runtimeOf } from '../runtime/runtime.js';
import type { RunData, StepResult } from '../runtime/runs.js';
import { createEventBus, type EventBus, type StreamEvent } from './bus.js';
import { encodeText, writeTexts, type EncodedText } from './frames.js';

/**
 * The spec's WebSocket streams (section 4, messages in section 6), documented in
 * docs/guides/streams.md:
 *
 * - `GET /api/v1/ws/pipelines/{pipelineId}/runs/{runId}`: `step_update` messages of one pipeline run.
 * - `GET /api/v1/ws/alerts`: `alert_fired` / `alert_acknowledged` / `alert_resolved` messages.
 *
 * Authentication is the `token` query parameter only (access token or API key). Refusals happen
 * before the upgrade, as ordinary HTTP errors in the error envelope (401, 404, 429); once
 * connected, problems close the socket with one of CLOSE's codes.
 */

/**
 * Loaded without its type declarations on purpose: they augment every route shorthand with a
 * websocket overload, which changes how other routes' handlers (with `as never` options) are typed.
 */
const websocket = createRequire(import.meta.url)('@fastify/websocket') as FastifyPluginCallback<{ options?: ServerOptions }>;

/** A route with a WebSocket handler (@fastify/websocket's `wsHandler` route option). */
type WsRoute = Omit<RouteOptions, 'handler'> & {
  handler: (req: FastifyRequest) => Promise<unknown>;
  wsHandler: (socket: WebSocket, req: FastifyRequest) => void;
};
const wsRoute = (app: FastifyInstance, route: WsRoute) => app.route(route as unknown as RouteOptions);

export const CLOSE = {
  /** The service is shutting down (SIGTERM / close()); reconnect, to another replica if there is one. */
  goingAway: 1001,
  /** Something failed on the server's side. */
  internalError: 1011,
  /** The credential was revoked or expired while connected (checked on every heartbeat). */
  unauthorized: 4401,
  /** The credential is still valid but no longer allowed to read this stream. */
  forbidden: 4403,
  /** The pipeline or run (or its project) was deleted while connected. */
  notFound: 4404,
} as const;

export const DEFAULT_HEARTBEAT_SECONDS = 30;

/**
 * Step updates announced before the write that stores them are kept until that write's
 * run_stored (normally PROGRESS_MIN_MS to a few writes later), and at most this long: a run
 * whose process died never sends it.
 */
export const UNSTORED_TTL_MS = 5 * 60_000;

/**
 * Messages are written in batches, each socket's queue in one write. A pipeline's updates come in
 * bursts (a step ends, the next starts, a notification step runs and ends, the next starts: four
 * updates within ~2 ms, a turn of the event loop or two apart), and the fixed cost of a socket
 * write is most of a fan-out: written one by one to 500 sockets, the burst's last update waited
 * for three whole fan-outs before its own (see docs/guides/benchmarks.md). A batch is written
 * after the turn of the event loop that follows its first message, or later while the turn before
 * added messages, for at most BATCH_MAX_TURNS turns and BATCH_MAX_MS. It never waits on a timer:
 * on a busy machine a process that sleeps, even 1 ms, waits for a core again (measured: p50 from
 * 12 to 57 ms with a 1 ms timer at load 10 on 2 cores).
 */
export const BATCH_MAX_TURNS = 4;
export const BATCH_MAX_MS = 3;

const runKey = (tenantId: string, runId: string) => `run\u0000${tenantId}\u0000${runId}`;
const alertsKey = (tenantId: string) => `alerts\u0000${tenantId}`;

export const alertEventType = (status: unknown) =>
  status === 'firing'
    ? 'alert_fired'
    : status === 'acknowledged'
      ? 'alert_acknowledged'
      : status === 'resolved'
        ? 'alert_resolved'
        : undefined;

interface Access {
  actor: Actor;
  token: string;
  /** Pipeline streams: the run's project, pipeline and the run as it was at connect time. */
  run?: { projectId: string; pipelineId: string; runId: string; data: RunData };
}

interface Connection {
  socket: WebSocket;
  tenantId: string;
  /** What it follows: one pipeline run (runKey) or a tenant's alerts (alertsKey). */
  key: string;
  access: Access;
  alive: boolean;
  checking: boolean;
  onEvent(event: StreamEvent): void;
}

export interface Streams {
  bus: EventBus;
  /** Connected sockets now (for the bench and tests). */
  readonly size: number;
  /** Runs with step updates announced and not stored yet, kept for new subscribers (tests). */
  readonly unstoredRuns: number;
  /** Called after each batch is written (the bench: performance.now() before and after, sockets written). */
  onFlush?: (startedAt: number, endedAt: number, sockets: number) => void;
  /** Closes every socket with 1001 and stops the heartbeat and the bus. */
  close(): Promise<void>;
}

/** What a step's state so far looks like as messages: a subscriber that connects late catches up. */
function snapshot(run: RunData): Record<string, unknown>[] {
  const out: { at: string; order: number; msg: Record<string, unknown> }[] = [];
  run.steps.forEach((s: StepResult, i) => {
    const msg = (status: string, duration: number | null, at: string) => ({
      at,
      order: i * 2 + (status === 'running' ? 0 : 1),
      msg: { type: 'step_update', step_id: s.step_id, step_name: s.step_name, status, duration_seconds: duration, timestamp: at },
    });
    if (s.started_at) out.push(msg('running', null, s.started_at));
    if (s.status !== 'pending' && s.status !== 'running')
      out.push(msg(s.status, s.duration_seconds, s.finished_at ?? s.started_at ?? run.finished_at ?? run.started_at));
  });
  return out.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.order - b.order)).map((e) => e.msg);
}

const STREAMS = new WeakMap<ServiceContext, Streams>();

/** The streams of a running service (tests). */
export const streamsOf = (ctx: ServiceContext): Streams | undefined => STREAMS.get(ctx);

export async function registerStreams(app: FastifyInstance, ctx: ServiceContext): Promise<Streams> {
  const rt = runtimeOf(ctx);
  const bus = await createEventBus(ctx, app.log);
  const connections = new Set<Connection>();
  const accessOf = new WeakMap<FastifyRequest, Access>();
  const heartbeatMs = Math.max(10, (ctx.options.streamHeartbeatSeconds ?? DEFAULT_HEARTBEAT_SECONDS) * 1000);

  // Runtime events (this process) → bus → subscribers on every replica.
  const onStep = (tenantId: string, e: { pipeline_id: string; run_id: string; seq?: number; message: Record<string, unknown> }) =>
    bus.publish({ kind: 'step_update', tenantId, pipelineId: e.pipeline_id, runId: e.run_id, seq: e.seq, message: e.message });
  const onStored = (tenantId: string, e: { parent_id: string; run_id: string; seq: number }) =>
    bus.publish({ kind: 'run_stored', tenantId, pipelineId: e.parent_id, runId: e.run_id, seq: e.seq });
  const onAlert = (tenantId: string, alert: Record<string, unknown>) => {
    const type = alertEventType(alert.status);
    if (!type) return app.log.warn({ status: alert.status }, 'alert_update with an unknown alert status; not streamed');
    bus.publish({ kind: 'alert', tenantId, projectId: String(alert.project_id ?? ''), message: { type, alert, timestamp: rt.now() } });
  };
  rt.events.on('step_update', onStep);
  rt.events.on('run_stored', onStored);
  rt.events.on('alert_update', onAlert);

  /**
   * Per run (runKey): the step updates announced and not stored yet, in announce order. A new
   * subscriber takes a copy when it subscribes and sends them after the stored run it reads
   * next: an event announced before it subscribed is either still here or, its run_stored seen,
   * in the store that it reads afterwards (see RunRecorder.announce).
   */
  const unstored = new Map<string, { touched: number; events: { seq: number; message: Record<string, unknown> }[] }>();
  const remember = (key: string, seq: number, message: Record<string, unknown>) => {
    let run = unstored.get(key);
    if (!run) unstored.set(key, (run = { touched: 0, events: [] }));
    run.touched = Date.now();
    run.events.push({ seq, message });
  };
  const forget = (key: string, upTo: number) => {
    const run = unstored.get(key);
    if (!run) return;
    let n = 0;
    while (n < run.events.length && run.events[n].seq <= upTo) n++;
    if (n === run.events.length) unstored.delete(key);
    else run.events.splice(0, n);
  };

  /** Connections by what they follow, so an event costs only its own subscribers. */
  const following = new Map<string, Set<Connection>>();
  const unsubscribe = bus.subscribe((event) => {
    const key = event.kind === 'alert' ? alertsKey(event.tenantId) : runKey(event.tenantId, event.runId);
    if (event.kind === 'run_stored') return forget(key, event.seq);
    if (event.kind === 'step_update' && event.seq !== undefined) remember(key, event.seq, event.message);
    const subscribers = following.get(key);
    if (subscribers) for (const c of subscribers) c.onEvent(event);
  });

  // One event goes to many sockets: serialised and framed once, then queued per socket until
  // the batch is written, each socket's queue at once (BATCH_MAX_TURNS).
  const encoded = new WeakMap<object, EncodedText>();
  const outbox = new Map<Connection, EncodedText[]>();
  let flushTimer: NodeJS.Immediate | undefined;
  let queued = 0;
  let queuedAtLastTurn = 0;
  let turns = 0;
  let firstQueuedAt = 0;
  const nextTurn = () => {
    turns++;
    if (turns < BATCH_MAX_TURNS && (turns < 2 || queued > queuedAtLastTurn) && performance.now() - firstQueuedAt < BATCH_MAX_MS) {
      queuedAtLastTurn = queued;
      flushTimer = setImmediate(nextTurn);
      return;
    }
    flush();
  };
  const flush = () => {
    flushTimer = undefined;
    queued = queuedAtLastTurn = turns = 0;
    const startedAt = performance.now();
    const joined = new Map<string, Buffer>();
    for (const [c, texts] of outbox) if (c.socket.readyState === c.socket.OPEN) writeTexts(c.socket, texts, joined);
    const sockets = outbox.size;
    outbox.clear();
    streams.onFlush?.(startedAt, performance.now(), sockets);
  };
  const send = (c: Connection, msg: object) => {
    if (c.socket.readyState !== c.socket.OPEN) return;
    let text = encoded.get(msg);
    if (text === undefined) encoded.set(msg, (text = encodeText(msg)));
    const texts = outbox.get(c);
    if (texts) texts.push(text);
    else outbox.set(c, [text]);
    queued++;
    if (flushTimer) return;
    firstQueuedAt = performance.now();
    flushTimer = setImmediate(nextTurn);
  };
  const closeWith = (c: Connection, code: number, reason: string) => {
    if (c.socket.readyState === c.socket.OPEN || c.socket.readyState === c.socket.CONNECTING) c.socket.close(code, reason);
  };

  /** Once per heartbeat: the credential must still authenticate, the run must still exist. */
  const recheck = async (c: Connection) => {
    if (c.checking) return;
    c.checking = true;
    try {
      try {
        await ctx.auth.authenticate(c.tenantId, c.access.token);
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) return closeWith(c, CLOSE.unauthorized, err.message.slice(0, 120));
        throw err;
      }
      const run = c.access.run;
      if (run && !(await ctx.resources.exists(c.tenantId, run.projectId, 'pipeline', run.pipelineId)))
        closeWith(c, CLOSE.notFound, 'The pipeline was deleted');
    } catch (err) {
      app.log.warn({ err }, 'stream credential check failed; trying again next heartbeat');
    } finally {
      c.checking = false;
    }
  };

  const heartbeat = setInterval(() => {
    const stale = Date.now() - UNSTORED_TTL_MS;
    for (const [key, run] of unstored) if (run.touched < stale) unstored.delete(key);
    for (const c of connections) {
      if (!c.alive) {
        c.socket.terminate();
        continue;
      }
      c.alive = false;
      c.socket.ping();
      void recheck(c);
    }
  }, heartbeatMs);
  heartbeat.unref();

  await app.register(websocket, { options: { maxPayload: 4096 } });

  const authenticate = async (req: FastifyRequest): Promise<Access> => {
    const token = (req.query as { token?: unknown }).token;
    if (typeof token !== 'string' || token === '')
      throw unauthorized('Missing token query parameter: WebSocket streams authenticate with ?token=<access token or API key>');
    const actor = await ctx.auth.authenticate(req.tenant!.id, token);
    req.actor = actor;
    // Every level (read-only and up) may read streams; an API key reaches its own project only.
    return { actor, token };
  };

  const notWebSocket = async () => {
    throw new ApiError(
      'validation_error',
      'This is a WebSocket endpoint: connect with wss:// and an Upgrade: websocket request',
      [{ field: 'Upgrade', message: 'must be websocket' }],
      426,
    );
  };

  /** Connections live until the client, a heartbeat or shutdown closes them. */
  const open = (socket: WebSocket, req: FastifyRequest, key: string, onEvent: (c: Connection, e: StreamEvent) => void): Connection => {
    const access = accessOf.get(req)!;
    const c: Connection = { socket, tenantId: req.tenant!.id, key, access, alive: true, checking: false, onEvent: (e) => onEvent(c, e) };
    connections.add(c);
    let set = following.get(key);
    if (!set) following.set(key, (set = new Set()));
    set.add(c);
    socket.on('pong', () => (c.alive = true));
    socket.on('message', () => undefined); // streams are one-way; client messages are ignored
    socket.on('close', (code) => {
      connections.delete(c);
      const set = following.get(key);
      set?.delete(c);
      if (set?.size === 0) following.delete(key);
      app.log.info(
        { reqId: req.id, tenant: req.tenant!.slug, actor: `${access.actor.type}:${access.actor.id}`, path: req.url.split('?')[0], code },
        'stream closed',
      );
    });
    app.log.info(
      { reqId: req.id, tenant: req.tenant!.slug, actor: `${access.actor.type}:${access.actor.id}`, path: req.url.split('?')[0] },
      'stream opened',
    );
    return c;
  };

  const settings = { settings: { public: true } };
  const querySchema = { type: 'object', properties: { token: { type: 'string' } } };

  wsRoute(app, {
    method: 'GET',
    url: '/api/v1/ws/pipelines/:pipelineId/runs/:runId',
    config: settings,
    schema: { hide: true, querystring: querySchema },
    preValidation: async (req) => {
      const access = await authenticate(req);
      const { pipelineId, runId } = req.params as { pipelineId: string; runId: string };
      const tenantId = req.tenant!.id;
      const pipeline = await ctx.db.get<{ project_id: string }>(
        `SELECT project_id FROM resources WHERE tenant_id = ? AND kind = 'pipeline' AND id = ?`,
        [tenantId, pipelineId],
      );
      // Another project's pipeline is "not found" for an API key, exactly as on the REST paths.
      if (!pipeline || (access.actor.projectId && access.actor.projectId !== pipeline.project_id)) throw notFound('Pipeline');
      if (!(await ctx.resources.exists(tenantId, '', 'project', pipeline.project_id))) throw notFound('Pipeline');
      const run = await ctx.resources.get(tenantId, pipeline.project_id, 'run', runId);
      if (!run || run.parentId !== pipelineId || run.data.run_type !== 'pipeline') throw notFound('Run');
      access.run = { projectId: pipeline.project_id, pipelineId, runId, data: run.data as RunData };
      accessOf.set(req, access);
    },
    handler: notWebSocket,
    wsHandler: (socket, req) => {
      const run = accessOf.get(req)!.run!;
      // Each (step, status) is sent once: the catch-up snapshot and live events may overlap.
      const sent = new Set<string>();
      const deliver = (c: Connection, msg: Record<string, unknown>) => {
        const key = `${msg.step_id}\u0000${msg.status}`;
        if (sent.has(key)) return;
        sent.add(key);
        send(c, msg);
      };
      let buffered: Record<string, unknown>[] | undefined = [];
      const key = runKey(req.tenant!.id, run.runId);
      const c = open(socket, req, key, (conn, e) => {
        if (e.kind !== 'step_update' || e.pipelineId !== run.pipelineId) return;
        if (buffered) buffered.push(e.message);
        else deliver(conn, e.message);
      });
      // Subscribed first, with a copy of what is announced and not stored yet, then the run
      // re-read: stored run + that copy + live events hold every update (no (step, status) twice).
      const announced = unstored.get(key)?.events.map((e) => e.message) ?? [];
      void (async () => {
        try {
          const now = await ctx.resources.get(c.tenantId, run.projectId, 'run', run.runId);
          for (const msg of snapshot((now?.data as RunData | undefined) ?? run.data)) deliver(c, msg);
        } catch (err) {
          app.log.error({ err }, 'stream could not read the run');
          return closeWith(c, CLOSE.internalError, 'Could not read the run');
        }
        for (const msg of announced) deliver(c, msg);
        for (const msg of buffered ?? []) deliver(c, msg);
        buffered = undefined;
      })();
    },
  });

  wsRoute(app, {
    method: 'GET',
    url: '/api/v1/ws/alerts',
    config: settings,
    schema: { hide: true, querystring: querySchema },
    preValidation: async (req) => {
      accessOf.set(req, await authenticate(req));
    },
    handler: notWebSocket,
    wsHandler: (socket, req) => {
      const projectId = accessOf.get(req)!.actor.projectId;
      open(socket, req, alertsKey(req.tenant!.id), (c, e) => {
        if (e.kind !== 'alert') return;
        // User tokens see the whole tenant; an API key only its project.
        if (projectId && e.projectId !== projectId) return;
        send(c, e.message);
      });
    },
  });

  let closing: Promise<void> | undefined;
  const streams: Streams = {
    bus,
    get size() {
      return connections.size;
    },
    get unstoredRuns() {
      return unstored.size;
    },
    close: () =>
      (closing ??= (async () => {
        clearInterval(heartbeat);
        clearImmediate(flushTimer);
        flush();
        rt.events.off('step_update', onStep);
        rt.events.off('run_stored', onStored);
        rt.events.off('alert_update', onAlert);
        const all = [...connections];
        await Promise.all(
          all.map(
            (c) =>
              new Promise<void>((resolve) => {
                if (c.socket.readyState === c.socket.CLOSED) return resolve();
                const timer = setTimeout(() => {
                  c.socket.terminate();
                  resolve();
                }, 1000);
                c.socket.once('close', () => {
                  clearTimeout(timer);
                  resolve();
                });
                closeWith(c, CLOSE.goingAway, 'Server shutting down');
              }),
          ),
        );
        unsubscribe();
        await bus.close();
      })()),
  };
  STREAMS.set(ctx, streams);
  return streams;
}
