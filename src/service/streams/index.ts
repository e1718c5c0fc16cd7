import { createRequire } from 'node:module';
import type { FastifyInstance, FastifyPluginCallback, FastifyRequest, RouteOptions } from 'fastify';
import type { ServerOptions, WebSocket } from 'ws';
import type { ServiceContext } from '../context.js';
import type { Actor } from '../auth/actor.js';
import { ApiError, notFound, unauthorized } from '../errors.js';
import { runtimeOf } from '../runtime/runtime.js';
import type { RunData, StepResult } from '../runtime/runs.js';
import { createEventBus, type EventBus, type StreamEvent } from './bus.js';
import { encodeText, writeText, type EncodedText } from './frames.js';

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
type WsRoute = Omit<RouteOptions, 'handler'> & { handler: (req: FastifyRequest) => Promise<unknown>; wsHandler: (socket: WebSocket, req: FastifyRequest) => void };
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

export const alertEventType = (status: unknown) =>
  status === 'firing' ? 'alert_fired' : status === 'acknowledged' ? 'alert_acknowledged' : status === 'resolved' ? 'alert_resolved' : undefined;

interface Access {
  actor: Actor;
  token: string;
  /** Pipeline streams: the run's project, pipeline and the run as it was at connect time. */
  run?: { projectId: string; pipelineId: string; runId: string; data: RunData };
}

interface Connection {
  socket: WebSocket;
  tenantId: string;
  access: Access;
  alive: boolean;
  checking: boolean;
  onEvent(event: StreamEvent): void;
}

export interface Streams {
  bus: EventBus;
  /** Connected sockets now (for the bench and tests). */
  readonly size: number;
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
    if (s.status !== 'pending' && s.status !== 'running') out.push(msg(s.status, s.duration_seconds, s.finished_at ?? s.started_at ?? run.finished_at ?? run.started_at));
  });
  return out.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.order - b.order)).map((e) => e.msg);
}

export async function registerStreams(app: FastifyInstance, ctx: ServiceContext): Promise<Streams> {
  const rt = runtimeOf(ctx);
  const bus = await createEventBus(ctx, app.log);
  const connections = new Set<Connection>();
  const accessOf = new WeakMap<FastifyRequest, Access>();
  const heartbeatMs = Math.max(10, (ctx.options.streamHeartbeatSeconds ?? DEFAULT_HEARTBEAT_SECONDS) * 1000);

  // Runtime events (this process) → bus → subscribers on every replica.
  const onStep = (tenantId: string, e: { pipeline_id: string; run_id: string; message: Record<string, unknown> }) =>
    bus.publish({ kind: 'step_update', tenantId, pipelineId: e.pipeline_id, runId: e.run_id, message: e.message });
  const onAlert = (tenantId: string, alert: Record<string, unknown>) => {
    const type = alertEventType(alert.status);
    if (!type) return app.log.warn({ status: alert.status }, 'alert_update with an unknown alert status; not streamed');
    bus.publish({ kind: 'alert', tenantId, projectId: String(alert.project_id ?? ''), message: { type, alert, timestamp: rt.now() } });
  };
  rt.events.on('step_update', onStep);
  rt.events.on('alert_update', onAlert);
  const unsubscribe = bus.subscribe((event) => {
    for (const c of connections) if (c.tenantId === event.tenantId) c.onEvent(event);
  });

  // One event goes to many sockets: serialised and framed once.
  const encoded = new WeakMap<object, EncodedText>();
  const send = (c: Connection, msg: object) => {
    if (c.socket.readyState !== c.socket.OPEN) return;
    let text = encoded.get(msg);
    if (text === undefined) encoded.set(msg, (text = encodeText(msg)));
    writeText(c.socket, text);
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
      if (run && !(await ctx.resources.exists(c.tenantId, run.projectId, 'pipeline', run.pipelineId))) closeWith(c, CLOSE.notFound, 'The pipeline was deleted');
    } catch (err) {
      app.log.warn({ err }, 'stream credential check failed; trying again next heartbeat');
    } finally {
      c.checking = false;
    }
  };

  const heartbeat = setInterval(() => {
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
    if (typeof token !== 'string' || token === '') throw unauthorized('Missing token query parameter: WebSocket streams authenticate with ?token=<access token or API key>');
    const actor = await ctx.auth.authenticate(req.tenant!.id, token);
    req.actor = actor;
    // Every level (read-only and up) may read streams; an API key reaches its own project only.
    return { actor, token };
  };

  const notWebSocket = async () => {
    throw new ApiError('validation_error', 'This is a WebSocket endpoint: connect with wss:// and an Upgrade: websocket request', [{ field: 'Upgrade', message: 'must be websocket' }], 426);
  };

  /** Connections live until the client, a heartbeat or shutdown closes them. */
  const open = (socket: WebSocket, req: FastifyRequest, onEvent: (c: Connection, e: StreamEvent) => void): Connection => {
    const access = accessOf.get(req)!;
    const c: Connection = { socket, tenantId: req.tenant!.id, access, alive: true, checking: false, onEvent: (e) => onEvent(c, e) };
    connections.add(c);
    socket.on('pong', () => (c.alive = true));
    socket.on('message', () => undefined); // streams are one-way; client messages are ignored
    socket.on('close', (code) => {
      connections.delete(c);
      app.log.info({ reqId: req.id, tenant: req.tenant!.slug, actor: `${access.actor.type}:${access.actor.id}`, path: req.url.split('?')[0], code }, 'stream closed');
    });
    app.log.info({ reqId: req.id, tenant: req.tenant!.slug, actor: `${access.actor.type}:${access.actor.id}`, path: req.url.split('?')[0] }, 'stream opened');
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
      const pipeline = await ctx.db.get<{ project_id: string }>(`SELECT project_id FROM resources WHERE tenant_id = ? AND kind = 'pipeline' AND id = ?`, [tenantId, pipelineId]);
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
      const c = open(socket, req, (conn, e) => {
        if (e.kind !== 'step_update' || e.runId !== run.runId || e.pipelineId !== run.pipelineId) return;
        if (buffered) buffered.push(e.message);
        else deliver(conn, e.message);
      });
      // Subscribed first, then the run re-read: nothing between connect-time and now is lost.
      void (async () => {
        try {
          const now = await ctx.resources.get(c.tenantId, run.projectId, 'run', run.runId);
          for (const msg of snapshot((now?.data as RunData | undefined) ?? run.data)) deliver(c, msg);
        } catch (err) {
          app.log.error({ err }, 'stream could not read the run');
          return closeWith(c, CLOSE.internalError, 'Could not read the run');
        }
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
      open(socket, req, (c, e) => {
        if (e.kind !== 'alert') return;
        // User tokens see the whole tenant; an API key only its project.
        if (projectId && e.projectId !== projectId) return;
        send(c, e.message);
      });
    },
  });

  let closing: Promise<void> | undefined;
  return {
    bus,
    get size() {
      return connections.size;
    },
    close: () =>
      (closing ??= (async () => {
        clearInterval(heartbeat);
        rt.events.off('step_update', onStep);
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
}
