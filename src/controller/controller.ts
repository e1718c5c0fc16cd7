import type { Server } from 'node:http';
import pino, { type Logger } from 'pino';
import type { DataPlatformClient } from '../client/index.js';
import { ConfigParseCache, formatConfigError, loadConfig, resolveSecrets, sortErrors } from '../config/index.js';
import {
  applyPlan,
  detectDrift,
  healthEntry,
  previewProvisioning,
  settle,
  driftJson,
  driftReport,
  EngineConfigError,
  preparePlan,
  subjectOfChange,
  type EngineOptions,
  type ApplyResult,
  type Outcome,
  type Plan,
  type PlannedChange,
} from '../engine/index.js';
import { Backoff, type BackoffOptions } from './backoff.js';
import { deferChanges } from './defer.js';
import { withJitter } from './duration.js';
import type { LeaderElector } from './leader/types.js';
import { ConditionTracker, deriveConditions, resultWithHealth, withHealth } from './health.js';
import { ControllerMetrics } from './metrics.js';
import { runEvents } from './events.js';
import type { Notifier } from './notify.js';
import { createStatusServer, listen } from './server.js';
import type { SuspensionStore } from './suspension.js';
import type { ConfigSource, Revision } from './source/types.js';
import { withRecentRun, type ControllerStatus, type ResourceStatus, type RunResult } from './status.js';

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
  /** Where events go (failed applies, degraded resources, drift, suspend...); none when absent. */
  notifier?: Notifier;
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

const iso = (ms: number) => new Date(ms).toISOString();

/** Backoff key of a project's provisioning (retried with back-off when the platform refuses it). */
const PROVISION = 'provision\u0000';

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
 */
export async function startController(options: ControllerOptions): Promise<RunningController> {
  const log = options.logger ?? pino({ name: 'dpctl-controller' });
  const elector = options.elector ?? soleLeader();
  const metrics = new ControllerMetrics({ processMetrics: options.processMetrics });
  const backoff = new Backoff(options.backoff);
  // One parse cache for the controller's life: a run re-parses only the files a commit changed.
  const engine: EngineOptions = { parseCache: new ConfigParseCache(), ...options.engine };
  const stopping = new AbortController();
  let runAbort: AbortController | undefined;
  let wake: (() => void) | undefined;
  let pendingTrigger: string | undefined;
  let suspended = options.suspended ?? false;
  let leader = false;
  let plannedOnce = false;
  let lastSeen: string | undefined;
  let lastGood: Revision | undefined;
  let runs = 0;
  let running = false;
  const conditions = new ConditionTracker();

  const status: ControllerStatus = {
    controller: {
      mode: options.mode,
      source: options.source.description,
      source_id: engine.sourceId,
      interval_ms: options.intervalMs,
      prune: engine.prune ?? false,
      suspended,
      ready: false,
      leader: { elected: false, identity: elector.identity, election: elector.description },
      started_at: iso(Date.now()),
    },
    revision: { fetched: null, applied: null, converged: null, invalid: null, fetch_error: null, last_fetch_at: null },
    last_run: null,
    runs: 0,
    recent_runs: [],
    conditions: [],
    resources: [],
    drift: [],
  };
  const ready = () => (leader ? plannedOnce : !stopping.signal.aborted);
  const snapshot = (): ControllerStatus => {
    const base = {
      ...status,
      controller: { ...status.controller, suspended, ready: ready(), leader: { ...status.controller.leader, elected: leader } },
      runs,
    };
    return { ...base, conditions: conditions.update(deriveConditions(base, running)) };
  };

  // Told when the status changes (a run ends, suspend, leadership): the page's live stream pushes it at once.
  const changeListeners = new Set<() => void>();
  const changed = () => {
    for (const listener of changeListeners) listener();
  };

  const trigger = (reason = 'manual') => {
    pendingTrigger = reason;
    wake?.();
  };
  // The stored suspension: saves in order, one after the other; failures are logged, never fatal.
  let saving: Promise<void> = Promise.resolve();
  let suspensionChanges = 0;
  const saveSuspension = (value: boolean) => {
    const store = options.suspension;
    if (!store) return;
    saving = saving
      .then(() => store.save(value))
      .catch((err: Error) =>
        log.error(
          { err: err.message, suspended: value, store: store.description },
          'saving the suspension failed: a restart or another leader may not keep it',
        ),
      );
  };
  /** Takes the stored value (a suspend or resume made meanwhile wins over what the load read). */
  const loadSuspension = async (when: string) => {
    const store = options.suspension;
    if (!store) return;
    await saving;
    const changes = suspensionChanges;
    let stored: boolean | undefined;
    try {
      stored = await store.load();
    } catch (err) {
      log.error({ err: (err as Error).message, store: store.description }, 'reading the stored suspension failed: keeping the current one');
      return;
    }
    if (stored === undefined || stored === suspended || changes !== suspensionChanges) return;
    suspended = stored;
    log.info(
      { suspended, when, store: store.description },
      stored ? 'reconciling suspended (stored suspension)' : 'reconciling resumed (stored suspension)',
    );
    metrics.recordStatus(snapshot());
    changed();
  };
  const setSuspended = (value: boolean) => {
    suspensionChanges++;
    // Saved even when unchanged here: the store may say otherwise (another replica wrote it).
    saveSuspension(value);
    if (suspended === value) return;
    suspended = value;
    log.info({ suspended }, value ? 'reconciling suspended' : 'reconciling resumed');
    metrics.recordStatus(snapshot());
    options.notifier?.notify({
      reason: value ? 'Suspended' : 'Resumed',
      severity: 'info',
      subject: engine.sourceId,
      message: value ? 'reconciling is suspended' : 'reconciling resumed',
      revision: lastGood?.id ?? null,
    });
    changed();
    // Resume runs at once rather than after the rest of the interval.
    if (!value) trigger('resume');
  };

  let server: Server | undefined;
  let url: string | undefined;
  if (options.listen) {
    server = createStatusServer({
      status: snapshot,
      ready,
      metrics,
      trigger,
      suspend: () => setSuspended(true),
      resume: () => setSuspended(false),
      subscribe: (listener) => changeListeners.add(listener),
      webhookSecret: options.webhookSecret,
      // A standby would only note a webhook for later: it passes it to the leader instead.
      relay: { isLeader: () => leader, leaderUrl: () => elector.leaderUrl() },
      logger: log,
    });
    url = await listen(server, options.listen.host, options.listen.port);
    log.info({ url }, 'status listener up');
    options.onListen?.(url);
  }

  // --suspend stores the suspension; without it, a stored one applies from the start.
  if (options.suspended) saveSuspension(true);
  else await loadSuspension('start');

  /** Waits `ms`, or less when triggered, stopped or leadership is lost. */
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        stopping.signal.removeEventListener('abort', done);
        wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      wake = done;
      stopping.signal.addEventListener('abort', done, { once: true });
    });

  elector.onLost(() => {
    leader = false;
    log.error({ election: elector.description }, 'leadership lost: stopping reconciling (changes in flight finish)');
    runAbort?.abort();
    wake?.();
  });

  /** Errors of a revision as `file:line:column: ...`, relative to the checkout. */
  const validate = (rev: Revision): string[] => {
    const { config, errors } = loadConfig([rev.configDir], {
      cwd: rev.root,
      allowUndeclaredProjects: engine.allowUndeclaredProjects ?? false,
      cache: engine.parseCache,
    });
    const resolved = resolveSecrets(config.documents, { env: engine.env ?? process.env });
    return sortErrors([...errors, ...resolved.errors], config.files).map(formatConfigError);
  };

  /** Fetches; a new revision is validated and, when valid, becomes the one in force. */
  const refresh = async (signal: AbortSignal) => {
    let rev: Revision;
    try {
      rev = await options.source.fetch(signal);
    } catch (err) {
      if (signal.aborted) throw err;
      status.revision.fetch_error = (err as Error).message;
      metrics.fetchErrors.inc();
      log.error({ source: options.source.description, err: (err as Error).message }, 'fetch failed: the revision in force stays');
      return;
    }
    status.revision.fetch_error = null;
    status.revision.last_fetch_at = iso(Date.now());
    if (rev.id === lastSeen) return;
    lastSeen = rev.id;
    status.revision.fetched = { id: rev.id, summary: rev.summary ?? null, at: iso(Date.now()) };
    const errors = validate(rev);
    if (errors.length) {
      status.revision.invalid = { id: rev.id, summary: rev.summary ?? null, errors };
      metrics.invalidRevisions.inc();
      log.error({ revision: rev.id, errors, in_force: lastGood?.id ?? null }, 'new revision is invalid: not applied');
      await options.source.cleanup?.([rev.id, ...(lastGood ? [lastGood.id] : [])]).catch(() => undefined);
      return;
    }
    status.revision.invalid = null;
    log.info({ revision: rev.id, summary: rev.summary, previous: lastGood?.id ?? null }, 'new revision');
    lastGood = rev;
    status.revision.applied = { id: rev.id, summary: rev.summary ?? null, at: iso(Date.now()) };
    // What failed may be fixed by the new commit: try everything again now.
    backoff.clear();
    await options.source.cleanup?.([rev.id]).catch(() => undefined);
  };

  const rowOf = (c: PlannedChange, state: ResourceStatus['state'], detail: string | null): ResourceStatus => ({
    kind: c.kind,
    yaml_kind: c.yamlKind,
    project: c.project ?? null,
    name: c.name,
    id: c.id ?? null,
    action: c.action,
    state,
    detail,
  });
  const changeDetail = (c: PlannedChange) =>
    c.action === 'create'
      ? 'not on the server'
      : c.action === 'delete'
        ? c.reasons.join('; ')
        : [c.changes.map((f) => f.field).join(', '), ...c.reasons].filter(Boolean).join('; ');

  /** Plans against the live platform and applies (or reports) the revision in force. */
  const reconcileRevision = async (
    rev: Revision,
    signal: AbortSignal,
  ): Promise<{ result: RunResult; errors: string[]; summary: Record<string, number> }> => {
    const paths = [rev.configDir];
    const opts: EngineOptions = { ...engine, cwd: rev.root };
    if (options.mode === 'drift') {
      const { plan, drift } = await detectDrift(options.client, paths, opts);
      status.drift = driftJson(plan.sourceId, drift, plan.errors).drift;
      const rows = plan.changes.map((c) => (c.action === 'no-op' ? rowOf(c, 'in-sync', null) : rowOf(c, 'drifted', changeDetail(c))));
      status.resources = withHealth(rows, observedHealth(plan));
      plannedOnce = true;
      return {
        result: resultWithHealth(plan.errors.length ? 'plan-error' : drift.length ? 'drift' : 'in-sync', status.resources),
        errors: plan.errors,
        summary: summaryOf(plan),
      };
    }
    const prepared = await preparePlan(options.client, paths, opts);
    const { plan } = prepared;
    plannedOnce = true;
    status.drift = driftJson(plan.sourceId, driftReport(plan, prepared.documents, prepared.state), plan.errors).drift;
    if (plan.errors.length) {
      status.resources = plan.changes.map((c) =>
        c.action === 'no-op' ? rowOf(c, 'in-sync', null) : rowOf(c, 'pending', `not applied: the plan has errors`),
      );
      log.error({ errors: plan.errors }, 'plan has errors: nothing applied');
      return { result: 'plan-error', errors: plan.errors, summary: summaryOf(plan) };
    }
    backoff.retain(new Set(plan.changes.filter((c) => c.action !== 'no-op').map((c) => c.key)), (key) => key.startsWith(PROVISION));
    const { plan: toApply, deferred } = deferChanges(plan, (key) => {
      const e = backoff.waiting(key);
      return e ? `backing off after ${e.failures} failure${e.failures === 1 ? '' : 's'}: ${e.lastError}` : undefined;
    });
    const outcomes = new Map<PlannedChange, Outcome>();
    const previews = (await previewProvisioning(options.client, plan, prepared.state, signal)).filter(
      (p) => !backoff.waiting(PROVISION + p.project),
    );
    let applied: ApplyResult = { outcomes: [], converged: true };
    if (toApply.changes.some((c) => c.action !== 'no-op')) {
      applied = await applyPlan(options.client, toApply, prepared.documents, prepared.state, prepared.secrets, {
        concurrency: engine.concurrency ?? 4,
        signal,
        onProgress: (line) => log.info({ revision: rev.id }, line.trim()),
      });
      for (const o of applied.outcomes) outcomes.set(o.change, o);
    }
    // Provision, and find out whether what the revision declares works (waits up to waitTimeoutMs).
    const settled = await settle(options.client, plan, applied, prepared.state, {
      previews,
      wait: true,
      deadline: Date.now() + (options.waitTimeoutMs ?? 300_000),
      testConnections: false,
      concurrency: engine.concurrency ?? 4,
      signal,
      onProgress: (line) => log.info({ revision: rev.id }, line.trim()),
    });
    for (const p of settled.provisioning) {
      if (p.failures.length)
        log.warn(
          {
            project: p.project,
            failures: p.failures,
            failures_in_a_row: backoff.failed(PROVISION + p.project, p.failures[0].message).failures,
          },
          'provisioning failed: backing off',
        );
      else backoff.succeeded(PROVISION + p.project);
    }
    status.resources = plan.changes.map((c) => {
      if (c.action === 'no-op') {
        backoff.succeeded(c.key);
        return rowOf(c, 'in-sync', null);
      }
      const held = deferred.get(c);
      if (held !== undefined) {
        const e = backoff.get(c.key);
        return { ...rowOf(c, 'backoff', held), ...(e ? { failures: e.failures, next_attempt_at: iso(e.nextAttemptAt) } : {}) };
      }
      // dpctl.dev/reconcile: observe: reported as drift, never applied.
      if (c.observeOnly) return rowOf(c, 'drifted', `observe only: ${changeDetail(c)}`);
      const o = outcomes.get(c);
      if (!o) return rowOf(c, 'pending', null);
      switch (o.status) {
        case 'done':
          backoff.succeeded(c.key);
          return { ...rowOf(c, 'applied', `${c.action} done`), id: o.id ?? c.id ?? null };
        case 'failed': {
          const e = backoff.failed(c.key, o.message ?? 'failed');
          log.warn(
            { resource: subjectOfChange(c), failures: e.failures, next_attempt_at: iso(e.nextAttemptAt), err: o.message },
            'change failed: backing off',
          );
          return { ...rowOf(c, 'failed', o.message ?? null), failures: e.failures, next_attempt_at: iso(e.nextAttemptAt) };
        }
        case 'skipped':
          return rowOf(c, 'skipped', o.message ?? null);
        default:
          return rowOf(c, 'unsupported', o.message ?? null);
      }
    });
    status.resources = withHealth(status.resources, settled.health);
    const failed = status.resources.filter(
      (r) => r.state === 'failed' || r.state === 'backoff' || r.state === 'skipped' || r.state === 'unsupported',
    );
    const result: RunResult = signal.aborted ? 'stopped' : failed.length ? 'incomplete' : resultWithHealth('converged', status.resources);
    const unwell = status.resources.filter((r) => r.state === 'degraded' || r.state === 'progressing');
    return {
      result,
      errors: [...failed, ...unwell].map(
        (r) => `${r.yaml_kind} ${r.project ? `${r.project}/` : ''}${r.name}: ${r.state}: ${r.detail ?? ''}`,
      ),
      summary: summaryOf(plan),
    };
  };

  /** Health as the plan observed it (drift mode, where nothing is applied nor waited for). */
  const observedHealth = (plan: Plan) => plan.changes.filter((c) => c.health).map((c) => healthEntry(c, c.health!));

  const runOnce = async (trigger: string) => {
    if (suspended) return;
    running = true;
    try {
      await reconcileOnce(trigger);
    } finally {
      running = false;
    }
  };

  /** What the last run came to (revision, result, errors, plan summary): a run that repeats it is logged at debug. */
  let lastOutcome: string | undefined;
  const reconcileOnce = async (trigger: string) => {
    const started = Date.now();
    const resourcesBefore = status.resources;
    const before = {
      revision: status.last_run?.revision ?? null,
      converged: status.revision.converged?.id ?? null,
      resources: status.resources,
    };
    runAbort = new AbortController();
    const signal = AbortSignal.any([runAbort.signal, stopping.signal]);
    let outcome: { result: RunResult; errors: string[]; summary: Record<string, number> };
    try {
      await refresh(signal);
      if (!lastGood) {
        outcome = {
          result: status.revision.invalid ? 'invalid' : 'error',
          errors: status.revision.invalid?.errors ?? [status.revision.fetch_error ?? 'no revision yet'],
          summary: {},
        };
      } else {
        outcome = await reconcileRevision(lastGood, signal);
        if (outcome.result === 'converged' || outcome.result === 'in-sync')
          status.revision.converged = { id: lastGood.id, summary: lastGood.summary ?? null, at: iso(Date.now()) };
        // The newest commit is invalid: the run applied the last good one, and says so.
        if (status.revision.invalid)
          outcome = {
            ...outcome,
            result: outcome.result === 'converged' || outcome.result === 'in-sync' ? 'invalid' : outcome.result,
            errors: [...status.revision.invalid.errors, ...outcome.errors],
          };
      }
    } catch (err) {
      const errors = err instanceof EngineConfigError ? err.errors : [(err as Error).message];
      outcome = { result: signal.aborted ? 'stopped' : 'error', errors, summary: {} };
      if (!signal.aborted) log.error({ errors }, 'reconcile failed');
    }
    metrics.recordClient(options.client.stats());
    const finished = Date.now();
    runs++;
    status.last_run = {
      trigger,
      started_at: iso(started),
      finished_at: iso(finished),
      duration_ms: finished - started,
      result: outcome.result,
      revision: lastGood?.id ?? null,
      summary: outcome.summary,
      errors: outcome.errors,
    };
    status.recent_runs = withRecentRun(status.recent_runs, status.last_run);
    for (const event of options.notifier ? runEvents(before, snapshot()) : []) options.notifier!.notify(event);
    changed();
    metrics.reconcileDuration.observe({ result: outcome.result }, (finished - started) / 1000);
    metrics.runs.inc({ result: outcome.result });
    metrics.recordStatus(snapshot());
    // Info when the run did something or came to something new: the first run, one someone asked for (webhook,
    // resume), a change applied or failed, another revision, result, error or plan. The same outcome again
    // every interval is debug, so a converged controller is quiet (/status and the metrics show each run).
    const outcomeKey = JSON.stringify([lastGood?.id ?? null, outcome.result, outcome.errors, outcome.summary]);
    const acted = status.resources !== resourcesBefore && status.resources.some((r) => r.state === 'applied' || r.state === 'failed');
    const notable = trigger !== 'interval' || acted || outcomeKey !== lastOutcome;
    lastOutcome = outcomeKey;
    log[notable ? 'info' : 'debug'](
      { trigger, revision: lastGood?.id ?? null, result: outcome.result, duration_ms: finished - started, summary: outcome.summary },
      'reconcile run',
    );
  };

  const main = async () => {
    while (!stopping.signal.aborted) {
      try {
        await elector.acquire(stopping.signal);
      } catch (err) {
        if (stopping.signal.aborted) break;
        log.error({ err: (err as Error).message, election: elector.description }, 'leader election failed; retrying');
        await sleep(withJitter(options.intervalMs));
        continue;
      }
      // The previous leader may have suspended or resumed: its choice holds here too.
      await loadSuspension('leading');
      leader = true;
      log.info({ identity: elector.identity, election: elector.description }, 'leading: reconciling');
      metrics.recordStatus(snapshot());
      changed();
      let reason = 'start';
      while (!stopping.signal.aborted && leader && elector.isLeader()) {
        const why = pendingTrigger ?? reason;
        pendingTrigger = undefined;
        await runOnce(why);
        if (stopping.signal.aborted || !elector.isLeader()) break;
        // While resources are still getting there (provisioning), look again sooner.
        const progressing = status.last_run?.result === 'progressing';
        if (pendingTrigger === undefined) await sleep(withJitter(progressing ? Math.min(options.intervalMs, 5_000) : options.intervalMs));
        reason = 'interval';
      }
      leader = false;
      metrics.recordStatus(snapshot());
      changed();
    }
  };
  const loop = main().catch((err: Error) => log.fatal({ err: err.message }, 'controller loop crashed'));
  metrics.recordStatus(snapshot());

  let stopped: Promise<void> | undefined;
  return {
    url,
    metrics,
    status: snapshot,
    trigger,
    suspend: () => setSuspended(true),
    resume: () => setSuspended(false),
    stop: () =>
      (stopped ??= (async () => {
        log.info('stopping: changes in flight finish, no new ones start');
        stopping.abort();
        wake?.();
        await loop;
        await saving;
        await elector.release().catch((err: Error) => log.warn({ err: err.message }, 'releasing leadership failed'));
        if (server) {
          const closed = new Promise<void>((resolve) => server!.close(() => resolve()));
          server.closeAllConnections();
          await closed;
        }
        if (options.closeClient ?? true) await options.client.close();
        await options.notifier?.flush();
        await options.source.close?.().catch((err: Error) => log.warn({ err: err.message }, 'closing the source failed'));
        log.info('stopped');
      })()),
  };
}

function summaryOf(plan: Plan): Record<string, number> {
  return {
    create: plan.summary.create,
    update: plan.summary.update,
    replace: plan.summary.replace,
    delete: plan.summary.delete,
    no_op: plan.summary['no-op'],
    unsupported: plan.summary.unsupported,
  };
}
