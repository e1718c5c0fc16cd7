import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ClientStats } from '../client/index.js';
import { RESOURCE_STATES, type ControllerStatus } from './status.js';

/**
 * The controller's Prometheus metrics, in a registry of its own (several controllers can run
 * in one process). Gauges are set from the status after every run; the API counters follow
 * the shared client's call counts.
 */
export class ControllerMetrics {
  readonly registry = new Registry();
  readonly reconcileDuration = new Histogram({
    name: 'dpctl_controller_reconcile_duration_seconds',
    help: 'Duration of one reconcile run (fetch, validate, plan, apply), by result',
    labelNames: ['result'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
    registers: [this.registry],
  });
  private readonly resources = new Gauge({
    name: 'dpctl_controller_resources',
    help: 'Managed resources by state after the last run',
    labelNames: ['state'],
    registers: [this.registry],
  });
  private readonly health = new Gauge({
    name: 'dpctl_controller_resource_health',
    help: 'Declared resources by kind and health (x-health rules) after the last run',
    labelNames: ['kind', 'health'],
    registers: [this.registry],
  });
  private readonly drift = new Gauge({
    name: 'dpctl_controller_drift_resources',
    help: 'Resources that differ from the config (last run), by drift type',
    labelNames: ['type'],
    registers: [this.registry],
  });
  private readonly driftTotal = new Gauge({
    name: 'dpctl_controller_drift_count',
    help: 'Resources that differ from the config (last run)',
    registers: [this.registry],
  });
  private readonly apiCalls = new Counter({
    name: 'dpctl_controller_api_calls_total',
    help: 'HTTP requests sent to the API (every attempt), by endpoint',
    labelNames: ['endpoint'],
    registers: [this.registry],
  });
  private readonly apiErrors = new Counter({
    name: 'dpctl_controller_api_errors_total',
    help: 'API requests that failed with a network error or a 5xx, by endpoint',
    labelNames: ['endpoint'],
    registers: [this.registry],
  });
  private readonly apiRateLimited = new Counter({
    name: 'dpctl_controller_api_rate_limited_total',
    help: '429 answers from the API, by endpoint',
    labelNames: ['endpoint'],
    registers: [this.registry],
  });
  readonly runs = new Counter({
    name: 'dpctl_controller_runs_total',
    help: 'Reconcile runs, by result',
    labelNames: ['result'],
    registers: [this.registry],
  });
  readonly invalidRevisions = new Counter({
    name: 'dpctl_controller_invalid_revisions_total',
    help: 'Revisions that failed validation (not applied)',
    registers: [this.registry],
  });
  readonly fetchErrors = new Counter({
    name: 'dpctl_controller_fetch_errors_total',
    help: 'Source fetches that failed',
    registers: [this.registry],
  });
  readonly webhooks = new Counter({
    name: 'dpctl_controller_webhooks_total',
    help: 'Webhook calls, by outcome',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  private readonly revisionInfo = new Gauge({
    name: 'dpctl_controller_applied_revision_info',
    help: 'The revision in force (last one that passed validation)',
    labelNames: ['revision', 'source'],
    registers: [this.registry],
  });
  private readonly convergedInfo = new Gauge({
    name: 'dpctl_controller_converged_revision_info',
    help: 'The last revision a run fully applied (apply mode) or found in sync (drift mode)',
    labelNames: ['revision', 'source'],
    registers: [this.registry],
  });
  private readonly lastRun = new Gauge({
    name: 'dpctl_controller_last_run_timestamp_seconds',
    help: 'When the last reconcile run finished',
    registers: [this.registry],
  });
  private readonly leader = new Gauge({
    name: 'dpctl_controller_leader',
    help: '1 while this replica holds leadership',
    registers: [this.registry],
  });
  private readonly suspended = new Gauge({
    name: 'dpctl_controller_suspended',
    help: '1 while reconciling is suspended',
    registers: [this.registry],
  });
  private seen = new Map<string, { calls: number; failed: number; rateLimited: number }>();

  constructor(options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'dpctl_controller_' });
  }

  /** Adds what the client counted since the last call. */
  recordClient(stats: ClientStats): void {
    for (const [endpoint, s] of Object.entries(stats.byEndpoint)) {
      const before = this.seen.get(endpoint) ?? { calls: 0, failed: 0, rateLimited: 0 };
      // A reset client starts again from zero: count from there.
      const delta = (now: number, then: number) => (now >= then ? now - then : now);
      this.apiCalls.inc({ endpoint }, delta(s.calls, before.calls));
      this.apiErrors.inc({ endpoint }, delta(s.failed, before.failed));
      this.apiRateLimited.inc({ endpoint }, delta(s.rateLimited, before.rateLimited));
      this.seen.set(endpoint, { calls: s.calls, failed: s.failed, rateLimited: s.rateLimited });
    }
  }

  /** Sets the gauges from the status. */
  recordStatus(status: ControllerStatus): void {
    const counts = new Map<string, number>(RESOURCE_STATES.map((s) => [s, 0]));
    for (const r of status.resources) counts.set(r.state, (counts.get(r.state) ?? 0) + 1);
    for (const [state, n] of counts) this.resources.set({ state }, n);
    this.health.reset();
    const byHealth = new Map<string, { kind: string; health: string; n: number }>();
    for (const r of status.resources) {
      if (!r.health) continue;
      const key = `${r.kind}\u0000${r.health}`;
      const entry = byHealth.get(key) ?? { kind: r.kind, health: r.health, n: 0 };
      entry.n++;
      byHealth.set(key, entry);
    }
    for (const e of byHealth.values()) this.health.set({ kind: e.kind, health: e.health }, e.n);
    for (const type of ['changed', 'deleted', 'orphaned', 'unmanaged'])
      this.drift.set({ type }, status.drift.filter((d) => d.type === type).length);
    this.driftTotal.set(status.drift.length);
    this.revisionInfo.reset();
    if (status.revision.applied) this.revisionInfo.set({ revision: status.revision.applied.id, source: status.controller.source }, 1);
    this.convergedInfo.reset();
    if (status.revision.converged) this.convergedInfo.set({ revision: status.revision.converged.id, source: status.controller.source }, 1);
    if (status.last_run) this.lastRun.set(Date.parse(status.last_run.finished_at) / 1000);
    this.leader.set(status.controller.leader.elected ? 1 : 0);
    this.suspended.set(status.controller.suspended ? 1 : 0);
  }
}
