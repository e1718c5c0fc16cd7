import type { Logger } from 'pino';
import type { DataPlatformClient } from '../client/index.js';
import { nextTurn } from '../steps.js';
import {
  applyPlan,
  detectDrift,
  driftJson,
  driftReport,
  preparePlan,
  previewProvisioning,
  settle,
  subjectOfChange,
  type ApplyResult,
  type EngineOptions,
  type HealthEntry,
  type Plan,
  type Prepared,
  type ProjectProvisioning,
  type SettleResult,
} from '../engine/index.js';
import type { Backoff } from './backoff.js';
import type { ConnectionTests } from './connection-tests.js';
import { deferChanges } from './defer.js';
import type { ControllerMetrics } from './metrics.js';
import { fetchRevision, Revisions, validateRevision } from './revisions.js';
import { RepeatedFailure } from './repeated-failure.js';
import type { ConfigSource, Revision } from './source/types.js';
import type { StatusBoard } from './status-board.js';
import {
  applyOutcome,
  backoffReason,
  driftOutcome,
  driftRows,
  errorOutcome,
  heldRows,
  isConverged,
  noRevisionOutcome,
  planErrorOutcome,
  resourceRows,
  withInvalidRevision,
  type ChangeOutcomes,
  type RunOutcome,
} from './summarise.js';

/**
 * One run of the controller over its source: fetch (a new revision is validated and, when valid,
 * put in force), plan against the live platform, apply (apply mode) or report (drift mode),
 * check health, summarise. Each step returns a typed result; what it changes on /status is
 * recorded as soon as it is known, so the page shows a long run's progress.
 */

/**
 * Environment variables no secretRef of a revision may read: the controller's own settings and
 * credentials (DATAPLATFORM_API_KEY, DPCTL_WEBHOOK_SECRET...) and git's (GIT_CONFIG_* can carry an
 * Authorization header, GIT_SSH_COMMAND the deploy key's path).
 */
export const CONTROLLER_ENV_PREFIXES = ['DATAPLATFORM_', 'DPCTL_', 'GIT_'];

/** The engine functions a run calls (fakes in unit tests). */
export interface EngineSteps {
  detectDrift: typeof detectDrift;
  preparePlan: typeof preparePlan;
  previewProvisioning: typeof previewProvisioning;
  applyPlan: typeof applyPlan;
  settle: typeof settle;
}

export interface ReconcilerDeps {
  source: ConfigSource;
  /** One client for the whole loop: its 429 pauses and call counts are shared by every run. */
  client: DataPlatformClient;
  mode: 'apply' | 'drift';
  engine: EngineOptions;
  backoff: Backoff;
  metrics: Pick<ControllerMetrics, 'fetchErrors' | 'invalidRevisions'>;
  log: Logger;
  /** How long a run waits for provisioning and health before it reports them progressing. */
  waitTimeoutMs: number;
  /** Directories of mounted secrets that file secretRefs may read besides the checkout. */
  secretDirs?: string[];
  /** With --test-connections: what the tests showed so far (absent: connections are not tested). */
  connectionTests?: ConnectionTests;
  steps?: Partial<EngineSteps>;
  now?: () => number;
}

/** Where a run records what it finds. */
export type StatusRecorder = Pick<StatusBoard, 'current' | 'record'>;

/** What the apply step did: the engine's result, each change's outcome, what was held back, the provisioning to do. */
export interface Applied extends ChangeOutcomes {
  result: ApplyResult;
  previews: ProjectProvisioning[];
}

/** Backoff key of a project's provisioning (retried with back-off when the platform refuses it). */
const PROVISION = 'provision\u0000';

const iso = (ms: number) => new Date(ms).toISOString();

export class RevisionReconciler {
  readonly revisions: Revisions;
  private plannedOnce = false;
  private readonly steps: EngineSteps;
  private readonly now: () => number;
  private readonly fetchFailures: RepeatedFailure;

  constructor(private readonly d: ReconcilerDeps) {
    this.now = d.now ?? Date.now;
    this.fetchFailures = new RepeatedFailure(this.now);
    this.revisions = new Revisions(this.now);
    this.steps = { detectDrift, preparePlan, previewProvisioning, applyPlan, settle, ...d.steps };
  }

  /** A plan was made against the live platform at least once. */
  get planned(): boolean {
    return this.plannedOnce;
  }

  /** One run. Never throws: a failure is the outcome `error` (`stopped` when aborted). */
  async run(signal: AbortSignal, status: StatusRecorder): Promise<RunOutcome> {
    try {
      await this.refresh(signal, status);
      const rev = this.revisions.inForce;
      if (!rev) return noRevisionOutcome(status.current.revision);
      const outcome = this.d.mode === 'drift' ? await this.reportDrift(rev, status) : await this.applyRevision(rev, signal, status);
      if (isConverged(outcome.result))
        status.record({ revision: { converged: { id: rev.id, summary: rev.summary ?? null, at: iso(this.now()) } } });
      return withInvalidRevision(outcome, status.current.revision.invalid);
    } catch (err) {
      const outcome = errorOutcome(err, signal.aborted);
      if (!signal.aborted) this.d.log.error({ errors: outcome.errors }, 'reconcile failed');
      return outcome;
    }
  }

  /** The fetch and validate steps: a new revision is validated and, when valid, becomes the one in force. */
  private async refresh(signal: AbortSignal, status: StatusRecorder): Promise<void> {
    const { source, log, metrics } = this.d;
    const { seen, revision } = this.revisions.see(await fetchRevision(source, signal));
    status.record({ revision });
    if (seen.kind === 'fetch-failed') {
      metrics.fetchErrors.inc();
      const repeat = this.fetchFailures.failed(seen.error);
      const meanwhile = repeat.unlogged ? { failing_since: iso(repeat.since), not_logged_since_last: repeat.unlogged } : {};
      if (repeat.log) log.error({ source: source.description, err: seen.error, ...meanwhile }, 'fetch failed: the revision in force stays');
      return;
    }
    const recovered = this.fetchFailures.succeeded();
    if (recovered) log.info({ source: source.description, failing_since: iso(recovered.since), failures: recovered.failures }, 'fetch recovered');
    if (seen.kind === 'unchanged') return;
    const { checked, revision: validated } = this.revisions.check(seen.rev, await validateRevision(seen.rev, this.optionsFor(seen.rev)));
    status.record({ revision: validated });
    const { rev } = checked;
    if (checked.kind === 'invalid') {
      metrics.invalidRevisions.inc();
      log.error({ revision: rev.id, errors: checked.errors, in_force: checked.inForce?.id ?? null }, 'new revision is invalid: not applied');
      await source.cleanup?.([rev.id, ...(checked.inForce ? [checked.inForce.id] : [])]).catch(() => undefined);
      return;
    }
    log.info({ revision: rev.id, summary: rev.summary, previous: checked.previous?.id ?? null }, 'new revision');
    // What failed may be fixed by the new commit: try everything again now.
    this.d.backoff.clear();
    await source.cleanup?.([rev.id]).catch(() => undefined);
  }

  /** Drift mode: plan (every kind, prune included) and report; nothing is applied nor waited for. */
  private async reportDrift(rev: Revision, status: StatusRecorder): Promise<RunOutcome> {
    const { plan, drift } = await this.steps.detectDrift(this.d.client, [rev.configDir], this.optionsFor(rev));
    await nextTurn();
    const resources = driftRows(plan);
    status.record({ drift: driftJson(plan.sourceId, drift, plan.errors).drift, resources });
    this.plannedOnce = true;
    return driftOutcome(plan, drift.length, resources);
  }

  /** Apply mode: plan, apply what is not backing off, check health, summarise. */
  private async applyRevision(rev: Revision, signal: AbortSignal, status: StatusRecorder): Promise<RunOutcome> {
    const prepared = await this.plan(rev, status);
    const { plan } = prepared;
    if (plan.errors.length) {
      status.record({ resources: heldRows(plan) });
      this.d.log.error({ errors: plan.errors }, 'plan has errors: nothing applied');
      return planErrorOutcome(plan);
    }
    const applied = await this.apply(prepared, rev, signal);
    const settled = await this.checkHealth(prepared, applied, rev, signal);
    await nextTurn();
    this.recordOutcomes(plan, applied);
    const resources = resourceRows(plan, applied, (key) => this.d.backoff.get(key), this.testedHealth(plan, settled));
    status.record({ resources });
    return applyOutcome(resources, signal.aborted, plan);
  }

  /** The plan step: against the live platform; from here on /status shows its drift. */
  private async plan(rev: Revision, status: StatusRecorder): Promise<Prepared> {
    const prepared = await this.steps.preparePlan(this.d.client, [rev.configDir], this.optionsFor(rev));
    const { plan } = prepared;
    this.plannedOnce = true;
    // Each phase of a run over 100,000 resources holds the event loop for a while: /healthz, /metrics and webhooks answer between them.
    await nextTurn();
    status.record({ drift: driftJson(plan.sourceId, driftReport(plan, prepared.documents, prepared.state), plan.errors).drift });
    await nextTurn();
    return prepared;
  }

  /** The apply step: resources backing off (and what needs them) wait; so does a project's provisioning. */
  private async apply(prepared: Prepared, rev: Revision, signal: AbortSignal): Promise<Applied> {
    const { client, backoff, engine } = this.d;
    const { plan } = prepared;
    backoff.retain(new Set(plan.changes.filter((c) => c.action !== 'no-op').map((c) => c.key)), (key) => key.startsWith(PROVISION));
    const { plan: toApply, deferred } = deferChanges(plan, (key) => backoffReason(backoff.waiting(key)));
    const previews = (await this.steps.previewProvisioning(client, plan, prepared.state, signal)).filter(
      (p) => !backoff.waiting(PROVISION + p.project),
    );
    let result: ApplyResult = { outcomes: [], converged: true };
    if (toApply.changes.some((c) => c.action !== 'no-op')) {
      result = await this.steps.applyPlan(client, toApply, prepared.documents, prepared.state, prepared.secrets, {
        concurrency: engine.concurrency ?? 4,
        signal,
        onProgress: this.progress(rev),
      });
    }
    return { result, previews, deferred, outcomes: new Map(result.outcomes.map((o) => [o.change, o])) };
  }

  /** The health step: provision, and find out whether what the revision declares works (waits up to waitTimeoutMs). */
  private async checkHealth(prepared: Prepared, applied: Applied, rev: Revision, signal: AbortSignal): Promise<SettleResult> {
    const { client, backoff, engine, log, connectionTests } = this.d;
    const settled = await this.steps.settle(client, prepared.plan, applied.result, prepared.state, {
      previews: applied.previews,
      wait: true,
      deadline: this.now() + this.d.waitTimeoutMs,
      testConnections: !!connectionTests,
      testUnproven: connectionTests?.shouldTest,
      concurrency: engine.concurrency ?? 4,
      signal,
      onProgress: this.progress(rev),
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
    return settled;
  }

  /** Final health with what the connection tests showed (a failed test degrades a connector that has not run). */
  private testedHealth(plan: Plan, settled: SettleResult): HealthEntry[] {
    const tests = this.d.connectionTests;
    if (!tests) return settled.health;
    tests.record(settled, new Set(plan.changes.map((c) => c.key)));
    for (const t of settled.tests)
      if (!t.success) this.d.log.warn({ resource: t.subject, err: t.message }, 'connection test failed: testing again after a back-off');
    return settled.health.map((h) => tests.healthOf(h));
  }

  /** The backoff after an apply: what is in sync or done succeeded, what failed backs off (logged); the rest keeps its entry. */
  private recordOutcomes(plan: Plan, applied: ChangeOutcomes): void {
    const { backoff, log } = this.d;
    for (const c of plan.changes) {
      if (c.action === 'no-op') backoff.succeeded(c.key);
      if (c.action === 'no-op' || applied.deferred.has(c) || c.observeOnly) continue;
      const o = applied.outcomes.get(c);
      if (o?.status === 'done') backoff.succeeded(c.key);
      if (o?.status !== 'failed') continue;
      const e = backoff.failed(c.key, o.message ?? 'failed');
      log.warn(
        { resource: subjectOfChange(c), failures: e.failures, next_attempt_at: iso(e.nextAttemptAt), err: o.message },
        'change failed: backing off',
      );
    }
  }

  /**
   * A revision is read confined to its checkout: whoever can push to the repository must not be
   * able to make the controller read its own files or credentials (see Confinement in config/secrets.ts).
   */
  private optionsFor(rev: Revision): EngineOptions {
    const confine = { root: rev.root, secretDirs: this.d.secretDirs ?? [], refusedEnvPrefixes: CONTROLLER_ENV_PREFIXES };
    return { ...this.d.engine, cwd: rev.root, confine };
  }

  private progress(rev: Revision): (line: string) => void {
    return (line) => this.d.log.info({ revision: rev.id }, line.trim());
  }
}
