import { createHash } from 'node:crypto';
import type { ControllerStatus, RevisionInfo, RunRecord } from './status.js';
import { durationText, esc, plural, shortRevision, timeTag } from './status-format.js';
import { driftTitle, renderDrift, renderResources } from './status-resources.js';

/** The live part of the status page: what the server renders at load and pushes on /status/events. */

/** Error lines shown before the rest is folded away; at most MAX_ERRORS in all (the JSON has them all). */
const ERRORS_OPEN = 5;
const MAX_ERRORS = 200;
const MAX_ERROR_CHARS = 2_000;
const clip = (line: string) => (line.length > MAX_ERROR_CHARS ? `${line.slice(0, MAX_ERROR_CHARS)}…` : line);
/** What the page leaves out of a list, and where to find it. */
const moreInJson = (n: number) => (n > 0 ? `<p class="more">${n} more in <a href="status.json">/status.json</a> (JSON).</p>` : '');

const rev = (r: RevisionInfo | null, now: number) =>
  r
    ? `<code title="${esc(r.id)}">${esc(shortRevision(r.id))}</code> ${esc(r.summary ?? '')} <span class="when">${timeTag(r.at, now)}</span>`
    : '<em>none yet</em>';

const controllerState = (s: ControllerStatus) =>
  s.controller.suspended ? 'suspended' : s.controller.leader.elected ? 'active (leader)' : 'standby';

/** The big line at the top: the Ready condition, as a team reads it from across the room. */
function renderOverall(s: ControllerStatus): string {
  const ready = s.conditions.find((c) => c.type === 'Ready');
  const status = ready?.status ?? 'Unknown';
  const word = status === 'True' ? 'Ready' : status === 'False' ? 'Not ready' : 'Unknown';
  return `<div id="overall" class="overall status-${esc(status)}"><b>${word}</b> <span>${esc(ready?.reason ?? '')}</span> <span class="msg">${esc(ready?.message ?? '')}</span></div>`;
}

function renderSummary(s: ControllerStatus, now: number): string {
  const run = s.last_run;
  const pairs: [string, string][] = [
    ['State', `<span id="state">${controllerState(s)}</span>`],
    ['Revision in force', `<span id="revision">${rev(s.revision.applied, now)}</span>`],
    ['Newest revision', `<span id="newest-revision">${rev(s.revision.fetched, now)}</span>`],
    ['Last converged', `<span id="converged-revision">${rev(s.revision.converged, now)}</span>`],
    [
      'Last run',
      run
        ? `<span id="last-run" class="pill result-${esc(run.result)}">${esc(run.result)}</span> ${timeTag(run.finished_at, now)}, ${esc(durationText(run.duration_ms))} (${esc(run.trigger)})`
        : '<span id="last-run">none yet</span>',
    ],
    ['Last fetch', timeTag(s.revision.last_fetch_at, now)],
    [driftTitle(s), `<span id="drift-count">${s.drift.length}</span>`],
  ];
  return `<dl class="summary">${pairs.map(([k, v]) => `<div><dt>${esc(k)}</dt><dd>${v}</dd></div>`).join('')}</dl>`;
}

function renderConditions(s: ControllerStatus, now: number): string {
  const items = s.conditions.map(
    (c) =>
      `<li class="cond status-${esc(c.status)}" data-condition="${esc(c.type)}" data-status="${esc(c.status)}"><b>${esc(c.type)}</b> <span class="cond-status">${esc(c.status)}</span> <span class="reason">${esc(c.reason)}</span>${c.message ? ` <span class="msg">${esc(c.message)}</span>` : ''} <span class="when">since ${timeTag(c.last_transition_time, now)}</span></li>`,
  );
  // The compact form (as kubectl shows conditions) on hover.
  const compact = s.conditions
    .map((c) => `${c.type}=${c.status}${c.status !== 'False' || c.type === 'Ready' ? ` (${c.reason})` : ''}`)
    .join(', ');
  return `<ul id="conditions" class="conditions" title="${esc(compact)}">${items.join('')}</ul>`;
}

/** Root cause first: the invalid revision's errors, then the fetch error, then the run's; each line once. */
export function orderedErrors(s: ControllerStatus): { source: string; line: string }[] {
  const seen = new Set<string>();
  const out: { source: string; line: string }[] = [];
  const add = (source: string, lines: string[]) => {
    for (const line of lines) if (!seen.has(line) && seen.add(line)) out.push({ source, line });
  };
  const invalid = s.revision.invalid;
  if (invalid) add(`revision ${shortRevision(invalid.id)} is invalid: not applied`, invalid.errors);
  if (s.revision.fetch_error) add('fetch failed', [s.revision.fetch_error]);
  if (s.last_run) add(`last run: ${s.last_run.result}`, s.last_run.errors);
  return out;
}

function renderErrors(s: ControllerStatus): string {
  const all = orderedErrors(s);
  if (!all.length) return '';
  const lines = all.slice(0, MAX_ERRORS);
  const li = (e: { source: string; line: string }) =>
    `<li><span class="source">${esc(e.source)}</span> <code>${esc(clip(e.line))}</code></li>`;
  const open = lines.slice(0, ERRORS_OPEN).map(li).join('');
  const rest = lines.slice(ERRORS_OPEN);
  const folded = rest.length
    ? `<details id="errors-more"><summary>${esc(plural(rest.length, 'more error'))}</summary><ol start="${ERRORS_OPEN + 1}">${rest.map(li).join('')}</ol></details>`
    : '';
  const cut = moreInJson(all.length - lines.length);
  return `<section class="errors"><h2>Errors <small>root cause first</small></h2><div id="errors"><ol>${open}</ol>${folded}</div>${cut}</section>`;
}

/** The last run's plan warnings: what it did not do, or did with a caveat (a project kept from prune). */
function renderWarnings(s: ControllerStatus): string {
  const warnings = s.last_run?.warnings ?? [];
  if (!warnings.length) return '';
  const shown = warnings.slice(0, MAX_ERRORS);
  const items = shown.map((w) => `<li><code>${esc(clip(w))}</code></li>`).join('');
  return `<section class="warnings"><h2>Warnings <small>of the last run's plan</small></h2><div id="warnings"><ul>${items}</ul></div>${moreInJson(warnings.length - shown.length)}</section>`;
}

const changes = (summary: Record<string, number>) =>
  Object.entries(summary)
    .filter(([k, n]) => n > 0 && k !== 'no_op')
    .map(([k, n]) => `${n} ${k}`)
    .join(', ') || '-';

function renderRuns(s: ControllerStatus, now: number): string {
  const runs: RunRecord[] = s.recent_runs ?? [];
  if (!runs.length) return '';
  const row = (r: RunRecord) =>
    `<tr><td>${timeTag(r.finished_at, now)}</td><td>${r.revision ? `<code title="${esc(r.revision)}">${esc(shortRevision(r.revision))}</code>` : '-'}</td><td><span class="pill result-${esc(r.result)}">${esc(r.result)}</span></td><td>${esc(durationText(r.duration_ms))}</td><td>${esc(r.trigger)}</td><td>${esc(changes(r.summary))}</td><td>${r.error_count ? `<span title="${esc(r.first_error ?? '')}">${esc(plural(r.error_count, 'error'))}</span>` : ''}${r.warning_count ? `${r.error_count ? ', ' : ''}${esc(plural(r.warning_count, 'warning'))}` : ''}</td></tr>`;
  return `<section><h2>Recent runs <small>${esc(plural(s.runs, 'run'))} since start, the last ${runs.length} here</small></h2>
<table id="runs"><thead><tr><th>Finished</th><th>Revision</th><th>Result</th><th>Duration</th><th>Trigger</th><th>Changes</th><th>Errors</th></tr></thead><tbody>${runs.map(row).join('')}</tbody></table></section>`;
}

/** Everything on the page that changes: the server renders it at load, and again for each live update. */
export function renderStatusFragment(s: ControllerStatus, now: number): string {
  return `${renderOverall(s)}
${renderConditions(s, now)}
${renderSummary(s, now)}
${renderErrors(s)}
${renderWarnings(s)}
<section><h2>Resources <small>${esc(plural(s.resources.length, 'resource'))}, by project</small></h2>${renderResources(s, now)}</section>
${renderDrift(s)}
${renderRuns(s, now)}
<p class="footer">Rendered ${timeTag(new Date(now).toISOString(), now)}. The same as JSON: <a href="status.json">/status.json</a>.</p>`;
}

/**
 * What a live update must follow: it changes when a run finishes, on suspend/resume, when
 * leadership or readiness changes, and with a new revision or condition. Short, for data-fp.
 */
export function statusFingerprint(s: ControllerStatus): string {
  const key = JSON.stringify([
    s.runs,
    s.last_run?.finished_at,
    s.controller.suspended,
    s.controller.leader.elected,
    s.controller.ready,
    s.revision.fetched?.id,
    s.revision.applied?.id,
    s.revision.converged?.id,
    s.revision.invalid?.id,
    s.revision.fetch_error,
    s.conditions.map((c) => [c.type, c.status, c.reason, c.message]),
  ]);
  return createHash('sha1').update(key).digest('hex').slice(0, 16);
}
