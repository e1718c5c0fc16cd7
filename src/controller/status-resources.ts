import { createHash } from 'node:crypto';
import type { ControllerStatus, ResourceState, ResourceStatus } from './status.js';
import { esc, plural, timeTag, valueText } from './status-format.js';

/** The status page's resources, grouped by project, and the drift with each field's diff. */

/** Rows shown on the page (resources, and drift entries); the JSON has them all. */
export const PAGE_ROWS = 500;
/** Fields shown per drift entry. */
const DRIFT_FIELDS = 50;

/** Problems first: what needs someone, then what differs, then what is on its way, then what is done. */
const ORDER: ResourceState[] = [
  'failed',
  'backoff',
  'degraded',
  'unsupported',
  'skipped',
  'drifted',
  'pending',
  'progressing',
  'applied',
  'in-sync',
];
const RANK = Object.fromEntries(ORDER.map((state, i) => [state, i])) as Record<ResourceState, number>;
const rank = (r: ResourceStatus) => Math.min(RANK[r.state] ?? RANK.pending, r.health === 'degraded' ? RANK.degraded : ORDER.length);
/** Failed, backing off, degraded, unsupported, skipped or drifted. */
export const isProblem = (r: ResourceStatus) => rank(r) <= RANK.drifted;

export interface ResourceGroup {
  /** null: the tenant-level kinds (those without a project). */
  project: string | null;
  all: ResourceStatus[];
  /** The rows shown (problems first), within the page's cap. */
  rows: ResourceStatus[];
}

/**
 * Groups by project, the tenant-level kinds first, then projects by name. The rows shown are
 * capped at `limit` over the whole page, and chosen problems first, so a problem is never the
 * row the cap leaves out; within a group, problems first, then by kind and name.
 */
export function groupResources(resources: ResourceStatus[], limit = PAGE_ROWS): ResourceGroup[] {
  const shown = new Set(
    resources
      .map((r, i) => ({ r, i }))
      .sort((a, b) => rank(a.r) - rank(b.r) || a.i - b.i)
      .slice(0, limit)
      .map((x) => x.r),
  );
  const byProject = new Map<string | null, ResourceStatus[]>();
  for (const r of resources) {
    const list = byProject.get(r.project) ?? [];
    list.push(r);
    byProject.set(r.project, list);
  }
  const order = (p: string | null) => (p === null ? '' : `~${p}`);
  return [...byProject]
    .sort(([a], [b]) => order(a).localeCompare(order(b)))
    .map(([project, all]) => ({
      project,
      all,
      rows: all
        .filter((r) => shown.has(r))
        .sort((a, b) => rank(a) - rank(b) || a.yaml_kind.localeCompare(b.yaml_kind) || a.name.localeCompare(b.name)),
    }));
}

/** "2 failed · 1 drifted · 20 in-sync", problems first. */
function stateCounts(rows: ResourceStatus[]): string {
  const counts = new Map<ResourceState, number>();
  for (const r of [...rows].sort((a, b) => (RANK[a.state] ?? RANK.pending) - (RANK[b.state] ?? RANK.pending)))
    counts.set(r.state, (counts.get(r.state) ?? 0) + 1);
  return [...counts]
    .map(([state, n]) => `<span class="pill state-${esc(state)}" data-state="${esc(state)}" data-count="${n}">${n} ${esc(state)}</span>`)
    .join(' ');
}

function renderRow(r: ResourceStatus, now: number): string {
  const health = r.health
    ? `<span class="pill health-${esc(r.health)}">${esc(r.health)}</span>${r.health_reason ? ` <span class="reason">${esc(r.health_reason)}</span>` : ''}`
    : '';
  const retry = r.failures
    ? ` <span class="retry">(${esc(plural(r.failures, 'failure'))}${r.next_attempt_at ? `, next attempt ${timeTag(r.next_attempt_at, now)}` : ''})</span>`
    : '';
  return `<tr class="row-${esc(r.state)}${isProblem(r) ? ' problem' : ''}" data-name="${esc(r.name)}"><td>${esc(r.yaml_kind)}</td><td>${esc(r.name)}</td><td><span class="pill state-${esc(r.state)}">${esc(r.state)}</span></td><td>${health}</td><td>${esc(r.detail ?? '')}${retry}</td></tr>`;
}

function renderGroup(g: ResourceGroup, now: number): string {
  const title = g.project === null ? 'Tenant-level' : g.project;
  const problems = g.all.filter(isProblem).length;
  const hidden = g.all.length - g.rows.length;
  return `<section class="group${problems ? ' has-problems' : ''}" data-project="${esc(g.project ?? '')}" data-tenant-level="${g.project === null}">
<h3><span class="group-name">${esc(title)}</span> <span class="counts">${stateCounts(g.all)}</span></h3>
<table><thead><tr><th>Kind</th><th>Name</th><th>State</th><th>Health</th><th>Detail</th></tr></thead><tbody>
${g.rows.map((r) => renderRow(r, now)).join('\n')}
</tbody></table>${hidden ? `<p class="more">${esc(plural(hidden, 'more resource'))} of this group in <a href="status.json">/status.json</a> (JSON).</p>` : ''}
</section>`;
}

/** The resources, one section per project (the tenant-level kinds first). */
export function renderResources(s: ControllerStatus, now: number): string {
  if (!s.resources.length)
    return '<div id="resources"><p class="empty">No resources yet: none declared, or no run has planned yet.</p></div>';
  const groups = groupResources(s.resources);
  const hidden = s.resources.length - groups.reduce((n, g) => n + g.rows.length, 0);
  return `<div id="resources">${groups.map((g) => renderGroup(g, now)).join('\n')}${hidden ? `<p class="more" id="resources-more">${hidden} more in <a href="status.json">/status.json</a> (JSON): the page shows ${PAGE_ROWS} rows, problems first.</p>` : ''}</div>`;
}

type DriftEntry = ControllerStatus['drift'][number];

/** A stable id for an entry's `<details>`, so the script keeps it open or closed across updates. */
const driftId = (d: DriftEntry) =>
  `drift-${createHash('sha1')
    .update(`${d.type}\0${d.kind}\0${d.project ?? ''}\0${d.name}`)
    .digest('hex')
    .slice(0, 12)}`;

function renderDriftEntry(d: DriftEntry): string {
  const head = `<span class="pill drift-${esc(d.type)}">${esc(d.type)}</span> <b>${esc(d.yaml_kind)}</b> ${esc(d.project ? `${d.project}/` : '')}${esc(d.name)} <span class="reason">${esc(d.detail)}</span>`;
  if (!d.fields.length) return `<div class="drift-entry" data-name="${esc(d.name)}">${head}</div>`;
  const fields = d.fields.slice(0, DRIFT_FIELDS);
  const rows = fields
    .map(
      (f) =>
        `<tr${'sensitive' in f && f.sensitive ? ' class="sensitive"' : ''}><td><code>${esc(f.field)}</code></td><td class="before"><pre>${esc(valueText(f.before))}</pre></td><td class="after"><pre>${esc(valueText(f.after))}</pre></td></tr>`,
    )
    .join('');
  const more = d.fields.length > fields.length ? `<p class="more">${d.fields.length - fields.length} more fields in /status.</p>` : '';
  return `<details class="drift-entry" id="${driftId(d)}" data-name="${esc(d.name)}"${d.fields.length <= 10 ? ' open' : ''}><summary>${head}</summary>
<table class="diff"><thead><tr><th>Field</th><th>On the server (before)</th><th>In the config (after)</th></tr></thead><tbody>${rows}</tbody></table>${more}</details>`;
}

/**
 * The section's title: in drift mode what differs is drift; in apply mode it is what the last run
 * planned, mostly the config's own edits (a new commit), which calling drift would misstate.
 */
export const driftTitle = (s: ControllerStatus) => (s.controller.mode === 'apply' ? 'Planned changes' : 'Drift');

/** The drift the last run found (drift mode), or the changes it planned (apply mode), with each resource's field diff. */
export function renderDrift(s: ControllerStatus): string {
  if (!s.drift.length) return '';
  const shown = s.drift.slice(0, PAGE_ROWS);
  const more = s.drift.length - shown.length;
  const n = s.drift.length;
  const what =
    s.controller.mode === 'apply'
      ? `differed from the config when the last run planned: edits of the config, or drift on the platform, which the run applies`
      : `${n === 1 ? 'differs' : 'differ'} from the config (found by the last run)`;
  return `<section><h2>${driftTitle(s)} <small>${esc(plural(n, 'resource'))} ${what}</small></h2>
<div id="drift">${shown.map(renderDriftEntry).join('\n')}</div>${more ? `<p class="more">${more} more in <a href="status.json">/status.json</a> (JSON).</p>` : ''}</section>`;
}
