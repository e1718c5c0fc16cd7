import { createRequire } from 'node:module';
import type { FastifyBaseLogger, FastifyInstance, FastifyPluginCallback, FastifyRequest, RouteOptions } from 'fastify';
import type { ServerOptions, WebSocket } from 'ws';
import type { ServiceContext } from '../context.js';
import type { RevokedCredentials } from '../auth/actor.js';
import { ApiError, notFound, unauthorized } from '../errors.js';
import { runtimeOf, type Runtime } from '../runtime/runtime.js';
import type { RunData } from '../runtime/runs.js';
import { createEventBus, type EventBus, type StreamEvent } from './bus.js';
import { alertsKey, closeSocket, Connections, eventKey, runKey, usesRevoked, type Access, type Connection } from './connections.js';
import { Outbox } from './outbox.js';
import { RunDelivery, snapshot } from './run-delivery.js';
import { UnstoredUpdates } from './unstored.js';
import { slicer } from '../runtime/slices.js';

export { BATCH_MAX_MS, BATCH_MAX_TURNS } from './outbox.js';

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

export const alertEventType = (status: unknown) =>
  status === 'firing'
    ? 'alert_fired'
    : status === 'acknowledged'
      ? 'alert_acknowledged'
      : status === 'resolved'
        ? 'alert_resolved'
        : undefined;

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

const STREAMS = new WeakMap<ServiceContext, Streams>();

/** The streams of a running service (tests). */
export const streamsOf = (ctx: ServiceContext): Streams | undefined => STREAMS.get(ctx);

/** Runtime events (this process) → bus → subscribers on every replica. Answers the function that detaches them. */
function publishRuntimeEvents(rt: Runtime, bus: EventBus, log: FastifyBaseLogger): () => void {
  const onStep = (tenantId: string, e: { pipeline_id: string; run_id: string; seq?: number; message: Record<string, unknown> }) =>
    bus.publish({ kind: 'step_update', tenantId, pipelineId: e.pipeline_id, runId: e.run_id, seq: e.seq, message: e.message });
  const onStored = (tenantId: string, e: { parent_id: string; run_id: string; seq: number }) =>
    bus.publish({ kind: 'run_stored', tenantId, pipelineId: e.parent_id, runId: e.run_id, seq: e.seq });
  const onRevoked = (tenantId: string, revoked: RevokedCredentials) => bus.publish({ kind: 'revoked', tenantId, ...revoked });
  const onAlert = (tenantId: string, alert: Record<string, unknown>) => {
    const type = alertEventType(alert.status);
    if (!type) return log.warn({ status: alert.status }, 'alert_update with an unknown alert status; not streamed');
    bus.publish({ kind: 'alert', tenantId, projectId: String(alert.project_id ?? ''), message: { type, alert, timestamp: rt.now() } });
  };
  rt.events.on('step_update', onStep);
  rt.events.on('run_stored', onStored);
  rt.events.on('alert_update', onAlert);
  rt.events.on('credentials_revoked', onRevoked);
  return () => {
    rt.events.off('step_update', onStep);
    rt.events.off('run_stored', onStored);
    rt.events.off('alert_update', onAlert);
    rt.events.off('credentials_revoked', onRevoked);
  };
}

/**
 * The bus's events to the connections that follow them; announced step updates kept until stored;
 * a revocation (from this replica or another) forgets the credentials here and checks the
 * connections that use them at once (a revoked key's stream stayed open until its heartbeat, 30 s).
 * Answers the unsubscribe.
 */
function deliverBusEvents(
  bus: EventBus,
  connections: Connections,
  unstored: UnstoredUpdates,
  revoked: { forget: (e: Extract<StreamEvent, { kind: 'revoked' }>) => void; recheck: (c: Connection) => Promise<void> },
): () => void {
  return bus.subscribe((event) => {
    if (event.kind === 'revoked') {
      revoked.forget(event);
      for (const c of connections) if (usesRevoked(c, event)) void revoked.recheck(c);
      return;
    }
    const key = eventKey(event);
    if (event.kind === 'run_stored') return unstored.forget(key, event.seq);
    if (event.kind === 'step_update' && event.seq !== undefined) unstored.remember(key, event.seq, event.message);
    for (const c of connections.subscribersOf(key)) c.onEvent(event);
  });
}

/** Once per heartbeat: the credential must still authenticate, the run must still exist. */
function credentialCheck(ctx: ServiceContext, log: FastifyBaseLogger): (c: Connection) => Promise<void> {
  const check = async (c: Connection): Promise<void> => {
    if (c.checking) {
      c.checkAgain = true;
      return;
    }
    c.checking = true;
    try {
      try {
        await ctx.auth.authenticate(c.tenantId, c.access.token);
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) return closeSocket(c.socket, CLOSE.unauthorized, err.message.slice(0, 120));
        throw err;
      }
      const run = c.access.run;
      if (run && !(await ctx.resources.exists(c.tenantId, run.projectId, 'pipeline', run.pipelineId)))
        closeSocket(c.socket, CLOSE.notFound, 'The pipeline was deleted');
    } catch (err) {
      log.warn({ err }, 'stream credential check failed; trying again next heartbeat');
    } finally {
      c.checking = false;
    }
    if (c.checkAgain) {
      c.checkAgain = false;
      await check(c);
    }
  };
  return check;
}

/**
 * Every `ms`: forgets announced updates kept too long, terminates the connections that did not
 * answer the last ping, and pings and re-checks the others. The re-checks (a credential lookup
 * each) go one after the other, yielding to the event loop every 10 ms: all at once, on SQLite,
 * 10,000 streams held every request for a few hundred milliseconds every heartbeat.
 */
function startHeartbeat(ms: number, connections: Connections, unstored: UnstoredUpdates, recheck: (c: Connection) => Promise<void>) {
  let rechecking: Promise<void> | undefined;
  const recheckAll = async (open: Connection[]) => {
    const slice = slicer();
    for (const c of open) {
      await recheck(c);
      await slice();
    }
  };
  const heartbeat = setInterval(() => {
    unstored.prune(UNSTORED_TTL_MS);
    const open: Connection[] = [];
    for (const c of connections) {
      if (!c.alive) {
        c.socket.terminate();
        continue;
      }
      c.alive = false;
      c.socket.ping();
      open.push(c);
    }
    if (!rechecking) rechecking = recheckAll(open).finally(() => (rechecking = undefined));
  }, ms);
  heartbeat.unref();
  return heartbeat;
}

/** What the stream routes share. */
interface StreamRouteContext {
  ctx: ServiceContext;
  /** The access checked before the upgrade, for the WebSocket handler. */
  accessOf: WeakMap<FastifyRequest, Access>;
  unstored: UnstoredUpdates;
  outbox: Outbox<Connection>;
  /** Connections live until the client, a heartbeat or shutdown closes them. */
  open(socket: WebSocket, req: FastifyRequest, key: string, onEvent: (c: Connection, e: StreamEvent) => void): Connection;
  /** Refuses (429) a new stream of a tenant that has its cap open on this instance. */
  admit(req: FastifyRequest): void;
}

/**
 * The per-tenant cap of open streams (`--max-streams-per-tenant`): the per-address cap alone let
 * one tenant, from a few addresses, hold thousands of sockets that each replay a finished run's
 * updates when they connect. Checked before the upgrade; upgrades in flight at that moment may
 * pass it together, by as many as arrive at once.
 */
function streamAdmission(ctx: ServiceContext, connections: Connections) {
  const max = ctx.options.maxStreamsPerTenant;
  return (req: FastifyRequest) => {
    if (max > 0 && connections.countOf(req.tenant!.id) >= max)
      throw new ApiError(
        'rate_limited',
        `This tenant has ${max} WebSocket streams open on this service, its limit (--max-streams-per-tenant); close some, or try again later`,
        undefined,
        429,
        { 'Retry-After': '5' },
      );
  };
}

function connectionOpener(log: FastifyBaseLogger, connections: Connections, accessOf: WeakMap<FastifyRequest, Access>) {
  return (socket: WebSocket, req: FastifyRequest, key: string, onEvent: (c: Connection, e: StreamEvent) => void): Connection => {
    const access = accessOf.get(req)!;
    const c: Connection = { socket, tenantId: req.tenant!.id, key, access, alive: true, checking: false, onEvent: (e) => onEvent(c, e) };
    connections.add(c);
    const fields = {
      reqId: req.id,
      tenant: req.tenant!.slug,
      actor: `${access.actor.type}:${access.actor.id}`,
      path: req.url.split('?')[0],
    };
    socket.on('pong', () => (c.alive = true));
    // Streams are one-way. Each client frame cost the service its TLS decryption, unmasking and
    // UTF-8 check, with no bound: 32 sockets sending 4 KB frames held other tenants' answers up to
    // 4 s. A client that sends data is closed (1008, policy violation); pings and pongs are not data.
    socket.on('message', () => socket.close(1008, 'streams are one-way: send nothing'));
    socket.on('close', (code) => {
      connections.delete(c);
      log.info({ ...fields, code }, 'stream closed');
    });
    log.info(fields, 'stream opened');
    return c;
  };
}

/**
 * The `token` query parameter's actor (authenticated on admission: request-pipeline.ts, `queryToken`):
 * every level (read-only and up) may read streams; an API key reaches its own project only.
 */
async function authenticate(ctx: ServiceContext, req: FastifyRequest): Promise<Access> {
  const token = (req.query as { token?: unknown }).token;
  if (typeof token !== 'string' || token === '')
    throw unauthorized('Missing token query parameter: WebSocket streams authenticate with ?token=<access token or API key>');
  req.actor ??= await ctx.auth.authenticate(req.tenant!.id, token);
  return { actor: req.actor, token };
}

const notWebSocket = async () => {
  throw new ApiError(
    'validation_error',
    'This is a WebSocket endpoint: connect with wss:// and an Upgrade: websocket request',
    [{ field: 'Upgrade', message: 'must be websocket' }],
    426,
  );
};

const settings = { settings: { public: true, queryToken: true } };
const querySchema = { type: 'object', properties: { token: { type: 'string' } } };

/** Checks before the upgrade that the run exists and the actor may read it; the access keeps the run as it is now. */
async function runAccess(ctx: ServiceContext, req: FastifyRequest): Promise<Access> {
  const access = await authenticate(ctx, req);
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
  return access;
}

/** `GET /api/v1/ws/pipelines/{pipelineId}/runs/{runId}`: the run's step updates, caught up first. */
function registerRunStream(app: FastifyInstance, s: StreamRouteContext) {
  wsRoute(app, {
    method: 'GET',
    url: '/api/v1/ws/pipelines/:pipelineId/runs/:runId',
    config: settings,
    schema: { hide: true, querystring: querySchema },
    preValidation: async (req) => {
      s.accessOf.set(req, await runAccess(s.ctx, req));
      s.admit(req);
    },
    handler: notWebSocket,
    wsHandler: (socket, req) => {
      const run = s.accessOf.get(req)!.run!;
      const key = runKey(req.tenant!.id, run.runId);
      const delivery = new RunDelivery((msg) => s.outbox.send(c, msg));
      const c = s.open(socket, req, key, (_c, e) => {
        if (e.kind !== 'step_update' || e.pipelineId !== run.pipelineId) return;
        delivery.live(e.message);
      });
      // Subscribed first, with a copy of what is announced and not stored yet, then the run
      // re-read: stored run + that copy + live events hold every update (no (step, status) twice).
      const announced = s.unstored.announced(key);
      void (async () => {
        try {
          const now = await s.ctx.resources.get(c.tenantId, run.projectId, 'run', run.runId);
          delivery.catchUp(snapshot((now?.data as RunData | undefined) ?? run.data));
        } catch (err) {
          app.log.error({ err }, 'stream could not read the run');
          return closeSocket(c.socket, CLOSE.internalError, 'Could not read the run');
        }
        delivery.goLive(announced);
      })();
    },
  });
}

/** `GET /api/v1/ws/alerts`: the tenant's alert transitions (an API key's: its project's). */
function registerAlertStream(app: FastifyInstance, s: StreamRouteContext) {
  wsRoute(app, {
    method: 'GET',
    url: '/api/v1/ws/alerts',
    config: settings,
    schema: { hide: true, querystring: querySchema },
    preValidation: async (req) => {
      s.accessOf.set(req, await authenticate(s.ctx, req));
      s.admit(req);
    },
    handler: notWebSocket,
    wsHandler: (socket, req) => {
      const projectId = s.accessOf.get(req)!.actor.projectId;
      s.open(socket, req, alertsKey(req.tenant!.id), (c, e) => {
        if (e.kind !== 'alert') return;
        // User tokens see the whole tenant; an API key only its project.
        if (projectId && e.projectId !== projectId) return;
        s.outbox.send(c, e.message);
      });
    },
  });
}

/** Closes every socket with 1001 and waits for each to close (terminated after a second). */
function closeConnections(connections: Connections): Promise<void[]> {
  return Promise.all(
    [...connections].map(
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
          closeSocket(c.socket, CLOSE.goingAway, 'Server shutting down');
        }),
    ),
  );
}

/**
 * The streams of a service: runtime events go to the bus, the bus's events to the connections that
 * follow them (through the batching outbox), a heartbeat checks every connection, and two
 * WebSocket routes open connections.
 */
export async function registerStreams(app: FastifyInstance, ctx: ServiceContext): Promise<Streams> {
  const rt = runtimeOf(ctx);
  const bus = await createEventBus(ctx, app.log);
  const connections = new Connections();
  const accessOf = new WeakMap<FastifyRequest, Access>();
  const heartbeatMs = Math.max(10, (ctx.options.streamHeartbeatSeconds ?? DEFAULT_HEARTBEAT_SECONDS) * 1000);
  const detachRuntime = publishRuntimeEvents(rt, bus, app.log);
  const unstored = new UnstoredUpdates();
  const recheck = credentialCheck(ctx, app.log);
  const unsubscribe = deliverBusEvents(bus, connections, unstored, {
    forget: (e) => ctx.auth.forgetCredentials(e.tenantId, e),
    recheck,
  });
  const outbox = new Outbox<Connection>((startedAt, endedAt, sockets) => streams.onFlush?.(startedAt, endedAt, sockets));
  const heartbeat = startHeartbeat(heartbeatMs, connections, unstored, recheck);

  // The largest frame read at all: a control frame's 125 bytes (data frames close the stream, above).
  await app.register(websocket, { options: { maxPayload: 125 } });
  const routes: StreamRouteContext = {
    ctx,
    accessOf,
    unstored,
    outbox,
    open: connectionOpener(app.log, connections, accessOf),
    admit: streamAdmission(ctx, connections),
  };
  registerRunStream(app, routes);
  registerAlertStream(app, routes);

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
        outbox.flush();
        detachRuntime();
        await closeConnections(connections);
        unsubscribe();
        await bus.close();
      })()),
  };
  STREAMS.set(ctx, streams);
  return streams;
}
