import type { ControllerStatus, ResourceStatus } from '../../src/controller/status.js';

/** What a hostile config, API or commit message could put on the status page. */
export const HOSTILE = '<script>alert("x")</script>';
export const HOSTILE_ATTR = '"><img src=x onerror="window.__pwned=1">';

const at = (secondsAgo: number, now: number) => new Date(now - secondsAgo * 1000).toISOString();

export function resource(over: Partial<ResourceStatus> & Pick<ResourceStatus, 'name'>): ResourceStatus {
  return {
    kind: 'connector',
    yaml_kind: 'Connector',
    project: 'analytics',
    id: null,
    action: 'no-op',
    state: 'in-sync',
    detail: null,
    ...over,
  };
}

/**
 * A status with something of everything: two projects and tenant-level kinds, failed, backing
 * off, degraded and drifted resources, a field diff (one sensitive), an invalid revision, a fetch
 * error, run errors and a few runs. `evil` puts hostile strings in every field that comes from
 * config, API or git.
 */
export function richStatus(now = Date.now(), evil = false): ControllerStatus {
  const h = (s: string) => (evil ? `${s} ${HOSTILE} ${HOSTILE_ATTR}` : s);
  const run = {
    trigger: h('webhook (push)'),
    started_at: at(14, now),
    finished_at: at(12, now),
    duration_ms: 2_345,
    result: 'incomplete' as const,
    revision: h('9f8e7d6c5b4a39281706'),
    summary: { create: 1, update: 2, replace: 0, delete: 0, no_op: 20, unsupported: 0 },
  };
  return {
    controller: {
      mode: 'apply',
      source: h('https://git.example.com/data/platform.git'),
      source_id: h('platform'),
      interval_ms: 30_000,
      prune: true,
      test_connections: false,
      suspended: false,
      ready: true,
      leader: { elected: true, identity: h('ctl-0'), election: h('lease dpctl-system/dpctl-controller') },
      started_at: at(3_700, now),
    },
    revision: {
      fetched: { id: h('0123456789abcdef0123'), summary: h('break the sources'), at: at(12, now) },
      applied: { id: h('9f8e7d6c5b4a39281706'), summary: h('orders every 5 min'), at: at(200, now) },
      converged: { id: h('1111111111112222'), summary: h('before that'), at: at(4_000, now) },
      invalid: {
        id: h('0123456789abcdef0123'),
        summary: h('break the sources'),
        errors: [
          h('platform/analytics/sources.yaml:12:5: Connector/orders-db: spec.port: must be integer'),
          h('platform/analytics/sources.yaml:20:3: Connector/x: unknown field "nope"'),
        ],
      },
      fetch_error: h('git fetch: connection reset'),
      last_fetch_at: at(12, now),
    },
    last_run: {
      ...run,
      errors: [
        h('platform/analytics/sources.yaml:12:5: Connector/orders-db: spec.port: must be integer'),
        h('Connector analytics/orders-db: failed: 422 spec.port out of range'),
        ...Array.from({ length: 8 }, (_, i) => h(`Dataset analytics/table-${i}: degraded: last sync failed`)),
      ],
    },
    runs: 42,
    recent_runs: [
      { ...run, error_count: 10, first_error: h('platform/analytics/sources.yaml:12:5: ...') },
      {
        ...run,
        result: 'converged',
        finished_at: at(200, now),
        started_at: at(201, now),
        duration_ms: 850,
        trigger: 'interval',
        error_count: 0,
        first_error: null,
      },
      {
        ...run,
        result: 'degraded',
        finished_at: at(3_000, now),
        started_at: at(3_010, now),
        duration_ms: 65_000,
        trigger: 'start',
        error_count: 1,
        first_error: h('Dataset analytics/x: degraded'),
      },
    ],
    conditions: [
      {
        type: 'Ready',
        status: 'False',
        reason: h('ApplyFailed'),
        message: h('Connector analytics/orders-db: failed: 422'),
        last_transition_time: at(12, now),
      },
      { type: 'Reconciling', status: 'False', reason: h('Idle'), message: '', last_transition_time: at(12, now) },
      {
        type: 'Stalled',
        status: 'True',
        reason: h('InvalidRevision'),
        message: h('platform/analytics/sources.yaml:12:5: ...'),
        last_transition_time: at(600, now),
      },
    ],
    resources: [
      resource({ kind: 'project', yaml_kind: 'Project', project: null, name: h('analytics') }),
      resource({ kind: 'project', yaml_kind: 'Project', project: null, name: h('marketing') }),
      resource({
        kind: 'api_key',
        yaml_kind: 'ApiKey',
        project: null,
        name: h('ci'),
        state: 'drifted',
        action: 'update',
        detail: h('scopes'),
      }),
      resource({ project: h('analytics'), name: h('clicks'), state: 'applied', action: 'update', detail: 'update done' }),
      resource({
        project: h('analytics'),
        name: h('orders-db'),
        state: 'failed',
        action: 'update',
        detail: h('422 spec.port out of range'),
        failures: 3,
        next_attempt_at: at(-20, now),
      }),
      resource({
        project: h('analytics'),
        name: h('events'),
        state: 'degraded',
        detail: h('last sync failed'),
        health: 'degraded',
        health_reason: h('last sync failed: timeout'),
      }),
      resource({
        project: h('analytics'),
        name: h('warehouse'),
        kind: 'warehouse',
        yaml_kind: 'Warehouse',
        state: 'in-sync',
        health: 'healthy',
        health_reason: null,
      }),
      resource({
        project: h('marketing'),
        name: h('crm'),
        state: 'backoff',
        detail: h('backing off after 2 failures: 500'),
        failures: 2,
        next_attempt_at: at(-95, now),
      }),
      resource({ project: h('marketing'), name: h('ads'), state: 'in-sync' }),
    ],
    drift: [
      {
        type: 'changed',
        kind: 'connector',
        yaml_kind: 'Connector',
        project: h('analytics'),
        name: h('orders-db'),
        id: 'c-1',
        fields: [
          { field: h('spec.schedule'), before: h('*/15 * * * *'), after: h('*/5 * * * *') },
          { field: 'spec.password', before: '(sensitive)', after: '(sensitive)', sensitive: true },
          { field: 'spec.options', before: { ssl: false, [h('key')]: h('v') }, after: null },
        ],
        detail: h('spec.schedule, spec.password, spec.options'),
      },
      {
        type: 'orphaned',
        kind: 'connector',
        yaml_kind: 'Connector',
        project: h('marketing'),
        name: h('old-feed'),
        id: 'c-2',
        fields: [],
        detail: h('managed by this source but no longer declared'),
      },
    ],
  };
}
