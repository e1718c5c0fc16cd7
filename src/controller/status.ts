/** What `/status` reports: JSON for machines, and the same as a small HTML page. */

export type ResourceState = 'in-sync' | 'applied' | 'drifted' | 'failed' | 'backoff' | 'skipped' | 'unsupported' | 'pending' | 'degraded' | 'progressing';
export const RESOURCE_STATES: ResourceState[] = ['in-sync', 'applied', 'drifted', 'failed', 'backoff', 'skipped', 'unsupported', 'pending', 'degraded', 'progressing'];

export type RunResult = 'converged' | 'drift' | 'in-sync' | 'incomplete' | 'plan-error' | 'invalid' | 'error' | 'suspended' | 'stopped' | 'degraded' | 'progressing';

/** A Kubernetes-style condition (Ready, Reconciling, Stalled), as Flux reports them. */
export interface Condition {
  type: 'Ready' | 'Reconciling' | 'Stalled';
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  last_transition_time: string;
}

export interface ResourceStatus {
  kind: string;
  yaml_kind: string;
  project: string | null;
  name: string;
  id: string | null;
  /** What the last run planned: create, update, replace, delete or no-op. */
  action: string;
  state: ResourceState;
  detail: string | null;
  failures?: number;
  next_attempt_at?: string;
  /** From the kind's x-health rule, for kinds that have one. */
  health?: import('../kinds/index.js').Health;
  health_reason?: string | null;
}

export interface RevisionInfo {
  id: string;
  summary: string | null;
  at: string;
}

export interface ControllerStatus {
  controller: {
    mode: 'apply' | 'drift';
    source: string;
    source_id: string;
    interval_ms: number;
    prune: boolean;
    suspended: boolean;
    ready: boolean;
    leader: { elected: boolean; identity: string; election: string };
    started_at: string;
  };
  revision: {
    /** Newest revision fetched. */
    fetched: RevisionInfo | null;
    /** The last revision that passed validation: the one in force. */
    applied: RevisionInfo | null;
    /** The last revision a run fully applied (apply mode) or found in sync (drift mode). */
    converged: RevisionInfo | null;
    /** Set while the newest revision fails validation: not applied. */
    invalid: { id: string; summary: string | null; errors: string[] } | null;
    fetch_error: string | null;
    last_fetch_at: string | null;
  };
  last_run: {
    trigger: string;
    started_at: string;
    finished_at: string;
    duration_ms: number;
    result: RunResult;
    revision: string | null;
    summary: Record<string, number>;
    errors: string[];
  } | null;
  runs: number;
  /** Ready, Reconciling, Stalled: derived from the rest in one place (health.ts). */
  conditions: Condition[];
  resources: ResourceStatus[];
  drift: ReturnType<typeof import('../engine/index.js').driftJson>['drift'];
}

const esc = (s: unknown) =>
  String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** Rows shown on the page; the JSON has them all. */
const PAGE_ROWS = 500;

/** A small, self-contained page (no scripts; refreshes itself every 10 s). */
export function renderStatusHtml(s: ControllerStatus): string {
  const run = s.last_run;
  const order = (r: ResourceStatus) => (r.state === 'in-sync' ? 1 : 0);
  const rows = [...s.resources].sort((a, b) => order(a) - order(b)).slice(0, PAGE_ROWS);
  const counts = new Map<string, number>();
  for (const r of s.resources) counts.set(r.state, (counts.get(r.state) ?? 0) + 1);
  const dl = (pairs: [string, string][]) => `<dl>${pairs.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${v}</dd>`).join('')}</dl>`;
  const rev = (r: RevisionInfo | null) => (r ? `<code>${esc(r.id.slice(0, 12))}</code> ${esc(r.summary ?? '')}` : '<em>none yet</em>');
  const errors = [...new Set([...(s.revision.invalid?.errors ?? []), ...(s.revision.fetch_error ? [s.revision.fetch_error] : []), ...(run?.errors ?? [])])];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="10">
<title>dpctl controller: ${esc(s.controller.source_id)}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;color:#222}
h1{font-size:1.3rem}h2{font-size:1.05rem;margin-top:1.5rem}
dl{display:grid;grid-template-columns:max-content auto;gap:.2rem 1rem}dt{font-weight:600}dd{margin:0}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:left}
.state-failed,.state-backoff,.result-error,.result-invalid,.result-plan-error,.result-incomplete{color:#b00020;font-weight:600}
.state-drifted,.result-drift,.state-progressing,.result-progressing{color:#a05a00;font-weight:600}.state-degraded,.result-degraded{color:#b00020;font-weight:600}.state-in-sync,.state-applied,.result-converged,.result-in-sync{color:#0a7a2f}
pre{background:#fff3f3;border:1px solid #e0b4b4;padding:.5rem;white-space:pre-wrap}
</style></head><body>
<h1>dpctl controller <small>${esc(s.controller.source_id)}</small></h1>
${dl([
  ['Source', esc(s.controller.source)],
  ['Mode', `${esc(s.controller.mode)}${s.controller.prune ? ' (prune)' : ''}, every ${esc(Math.round(s.controller.interval_ms / 1000))} s`],
  ['State', `<span id="state">${s.controller.suspended ? 'suspended' : s.controller.leader.elected ? 'active (leader)' : 'standby'}</span>`],
  ['Leader election', `${esc(s.controller.leader.election)}: ${esc(s.controller.leader.identity)}`],
  ['Revision in force', `<span id="revision">${rev(s.revision.applied)}</span>`],
  ['Newest revision', rev(s.revision.fetched)],
  ['Last converged revision', `<span id="converged-revision">${rev(s.revision.converged)}</span>`],
  ['Last run', run ? `<span id="last-run" class="result-${esc(run.result)}">${esc(run.result)}</span> at ${esc(run.finished_at)} (${esc(run.duration_ms)} ms, ${esc(run.trigger)})` : '<span id="last-run">none yet</span>'],
  ['Resources', [...counts].map(([k, v]) => `${esc(k)}: ${v}`).join(', ') || '0'],
  ['Drift', `<span id="drift-count">${s.drift.length}</span>`],
  ['Conditions', `<span id="conditions">${s.conditions.map((c) => `${esc(c.type)}=${esc(c.status)}${c.status !== 'False' || c.type === 'Ready' ? ` (${esc(c.reason)})` : ''}`).join(', ')}</span>`],
])}
${errors.length ? `<h2>Errors</h2><pre id="errors">${esc(errors.join('\n'))}</pre>` : ''}
${s.drift.length ? `<h2>Drift</h2><table id="drift"><thead><tr><th>Drift</th><th>Kind</th><th>Project</th><th>Name</th><th>Detail</th></tr></thead><tbody>${s.drift
    .slice(0, PAGE_ROWS)
    .map((d) => `<tr><td>${esc(d.type)}</td><td>${esc(d.yaml_kind)}</td><td>${esc(d.project ?? '-')}</td><td>${esc(d.name)}</td><td>${esc(d.detail)}</td></tr>`)
    .join('')}</tbody></table>` : ''}
<h2>Resources</h2>
<table id="resources"><thead><tr><th>Kind</th><th>Project</th><th>Name</th><th>State</th><th>Health</th><th>Detail</th></tr></thead><tbody>
${rows.map((r) => `<tr><td>${esc(r.yaml_kind)}</td><td>${esc(r.project ?? '-')}</td><td>${esc(r.name)}</td><td class="state-${esc(r.state)}">${esc(r.state)}</td><td>${esc(r.health ?? '')}</td><td>${esc(r.detail ?? '')}</td></tr>`).join('\n')}
</tbody></table>
${s.resources.length > PAGE_ROWS ? `<p>${s.resources.length - PAGE_ROWS} more in <a href="/status">/status</a> (JSON).</p>` : ''}
</body></html>
`;
}
