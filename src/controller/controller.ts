import type { Server } from 'node:http';
import pino, { type Logger } from 'pino';
import type { DataPlatformClient } from '../client/index.js';
import { ConfigParseCache } from '../config/index.js';
import type { EngineOptions } from '../engine/index.js';
import { Backoff, type BackoffOptions } from './backoff.js';
import { ConnectionTests } from './connection-tests.js';
import { RunReporter, startRun } from './finish-run.js';
import type { LeaderElector } from './leader/types.js';
import { ControllerLoop } from './loop.js';
import { ControllerMetrics } from './metrics.js';
import type { Notifier } from './notify.js';
import { RevisionReconciler } from './reconcile-revision.js';
import { createStatusServer, listen, type StatusHandlers } from './server.js';
import type { ConfigSource } from './source/types.js';
import { StatusBoard } from './status-board.js';
import type { ControllerStatus } from './status.js';
import { SuspendSwitch } from './suspend-switch.js';
import type { SuspensionStore } from './suspension.js';

export interface ControllerOptions {
  source: ConfigSource;
  /** One client for the whole loop: its 429 pauses and call counts are shared by every run. */
  client: DataPlatformClient;
  /** apply: make the platform match; drift: only report. */
  mode: 'apply' | 'drift';
  /** Time between runs (a little jitter is added). */
  intervalMs: number;
  /** Source id (ownership label), concurrency, prune and the mass-delete guard, adopt... as for `dpctl apply`. */
  engine: EngineOptions;
  /** Where the status listener listens; none when absent. */
  listen?: { host: string; port: number };
  /**
   * Called with the listener's URL once it listens and before leadership is sought, so an
   * elector's advertised URL can name a port picked by the system (port 0).
   */
  onListen?: (url: string) => void;
  /** Shared secret of the webhook (HMAC) and of suspend/resume. */
  webhookSecret?: string;
  /** Start suspended (nothing is fetched or applied until resumed); with a suspension store, stores it. */
  suspended?: boolean;
  /**
   * Keeps the suspension across restarts and leader changes (suspension.ts): loaded on start and
   * whenever this replica becomes leader, saved on suspend and resume. Absent: in memory only.
   */
  suspension?: SuspensionStore;
  /** Default: always leader (a single replica). */
  elector?: LeaderElector;
  logger?: Logger;
  backoff?: BackoffOptions;
  /** Node process metrics in /metrics (default true; off when several controllers share a process). */
  processMetrics?: boolean;
  /** Close the client on stop (default true). */
  closeClient?: boolean;
  /** How long a run waits for provisioning and health before it reports them progressing (default 5 min). */
  waitTimeoutMs?: number;
  /** --test-connections: test connectors after writing them, and once those that have never run (connection-tests.ts). */
  testConnections?: boolean;
  /** Where events go (failed applies, degraded resources, drift, suspend...); none when absent. */
  notifier?: Notifier;
  /** Directories of mounted secrets that the config's file secretRefs may read besides the checkout (--secrets-dir). */
  secretDirs?: string[];
}

export interface RunningController {
  /** Base URL of the status listener, when it listens. */
  url?: string;
  status(): ControllerStatus;
  /** Fetch and reconcile now (as a webhook does). */
  trigger(reason?: string): void;
  suspend(): void;
  resume(): void;
  /** Finishes the changes in flight, starts no more, gives leadership up, closes the listener. */
  stop(): Promise<void>;
  readonly metrics: ControllerMetrics;
}

/** Leadership that nobody contests: a single replica. */
const soleLeader = (): LeaderElector => ({
  description: 'none (always leader)',
  identity: `pid ${process.pid}`,
  acquire: async (signal) => signal.throwIfAborted(),
  isLeader: () => true,
  onLost: () => {},
  release: async () => {},
  leaderUrl: async () => undefined,
});

/**
 * The continuous reconciler: on start, on every interval and on a webhook it fetches the
 * source, validates a new revision (an invalid one is reported and the last good one stays in
 * force), plans against the live platform and applies (apply mode) or reports (drift mode).
 * Only the leader reconciles. Resources that fail back off exponentially, each on its own.
 *
 * Its parts: the loop (loop.ts: leadership, sleep and wake, suspend), one run over the revision
 * in force (reconcile-revision.ts, steps with typed results), the end of a run (finish-run.ts),
 * the status they record (status-board.ts) and its listener (server.ts).
 */
export async function startController(options: ControllerOptions): Promise<RunningController> {
  const log = options.logger ?? pino({ name: 'dpctl-controller' });
  const elector = options.elector ?? soleLeader();
  const metrics = new ControllerMetrics({ processMetrics: options.processMetrics });
  const backoff = new Backoff(options.backoff);
  // One parse cache for the controller's life: a run re-parses only the files a commit changed.
  const engine: EngineOptions = { parseCache: new ConfigParseCache(), ...options.engine };
  const suspension = new SuspendSwitch(options.suspended ?? false, options.suspension, log);
  const reconciler = new RevisionReconciler({
    source: options.source,
    client: options.client,
    mode: options.mode,
    engine,
    backoff,
    metrics,
    log,
    waitTimeoutMs: options.waitTimeoutMs ?? 300_000,
    connectionTests: options.testConnections ? new ConnectionTests(options.backoff) : undefined,
    secretDirs: options.secretDirs ?? [],
  });
  const board: StatusBoard = new StatusBoard(controllerInfo(options, engine, elector), () => ({
    suspended: suspension.value,
    ready: loop.ready(),
    leader: loop.leader,
    running: loop.running,
  }));
  const reporter = new RunReporter({ board, metrics, notifier: options.notifier, log });
  const loop: ControllerLoop = new ControllerLoop({
    elector,
    log,
    intervalMs: options.intervalMs,
    suspension,
    planned: () => reconciler.planned,
    lastResult: () => board.current.last_run?.result,
    reconcile: async (trigger, signal) => {
      const start = startRun(board.current, trigger);
      const outcome = await reconciler.run(signal, board);
      // No turn of the event loop here: the run's rows are on the board already, and /status must not
      // show them beside the previous run's last_run (the report below records this run's).
      metrics.recordClient(options.client.stats());
      reporter.report(start, outcome, reconciler.revisions.inForce?.id ?? null);
    },
    publish: (suspended) => {
      metrics.recordStatus(board.snapshot());
      if (suspended !== undefined)
        options.notifier?.notify({
          reason: suspended ? 'Suspended' : 'Resumed',
          severity: 'info',
          subject: engine.sourceId,
          message: suspended ? 'reconciling is suspended' : 'reconciling resumed',
          revision: reconciler.revisions.inForce?.id ?? null,
        });
      board.changed();
    },
  });

  const listener = options.listen
    ? await startListener(options.listen, log, {
        ...loop.serverHooks(),
        status: () => board.snapshot(),
        metrics,
        subscribe: (listener) => board.subscribe(listener),
        webhookSecret: options.webhookSecret,
        logger: log,
      })
    : undefined;
  if (listener) options.onListen?.(listener.url);

  // --suspend stores the suspension; without it, a stored one applies from the start.
  if (options.suspended) suspension.save(true);
  else await loop.loadSuspension('start');

  loop.start();
  metrics.recordStatus(board.snapshot());

  let stopped: Promise<void> | undefined;
  return {
    url: listener?.url,
    metrics,
    status: () => board.snapshot(),
    trigger: (reason) => loop.trigger(reason),
    suspend: () => loop.suspend(),
    resume: () => loop.resume(),
    stop: () => (stopped ??= stopController(options, log, { loop, suspension, elector, server: listener?.server })),
  };
}

/** The status listener, listening. */
async function startListener(at: { host: string; port: number }, log: Logger, handlers: StatusHandlers): Promise<{ server: Server; url: string }> {
  const server = createStatusServer(handlers);
  const url = await listen(server, at.host, at.port);
  log.info({ url }, 'status listener up');
  return { server, url };
}

/** The status's description of the controller (its live fields are the snapshot's). */
function controllerInfo(options: ControllerOptions, engine: EngineOptions, elector: LeaderElector): ControllerStatus['controller'] {
  return {
    mode: options.mode,
    source: options.source.description,
    source_id: engine.sourceId,
    interval_ms: options.intervalMs,
    prune: engine.prune ?? false,
    test_connections: options.testConnections ?? false,
    suspended: options.suspended ?? false,
    ready: false,
    leader: { elected: false, identity: elector.identity, election: elector.description },
    started_at: new Date().toISOString(),
  };
}

/** Finishes the changes in flight and starts no more, gives leadership up, closes the listener, the client, the notifier and the source. */
async function stopController(
  options: ControllerOptions,
  log: Logger,
  parts: { loop: ControllerLoop; suspension: SuspendSwitch; elector: LeaderElector; server: Server | undefined },
): Promise<void> {
  const { loop, suspension, elector, server } = parts;
  log.info('stopping: changes in flight finish, no new ones start');
  await loop.stop();
  await suspension.settled();
  await elector.release().catch((err: Error) => log.warn({ err: err.message }, 'releasing leadership failed'));
  if (server) {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await closed;
  }
  if (options.closeClient ?? true) await options.client.close();
  await options.notifier?.flush();
  await options.source.close?.().catch((err: Error) => log.warn({ err: err.message }, 'closing the source failed'));
  log.info('stopped');
}
