import { appendTo, maxOf } from '../collections.js';
import { SCOPE_CONTAINER } from '../kinds/index.js';
import { rootCauses } from '../config/index.js';
import { formatProblems, problemLines, type Problem } from './problems.js';
import type { ApplyResult } from './apply.js';
import { SENSITIVE, type FieldChange } from './diff.js';
import type { DriftEntry } from './drift.js';
import { subjectOfChange, type Action, type Plan, type PlannedChange, type ResourceEntry } from './plan.js';

const SYMBOL: Record<Action, string> = { create: '+', update: '~', replace: '-/+', delete: '-', 'no-op': ' ' };
const COLOUR: Record<Action, string> = { create: '32', update: '33', replace: '35', delete: '31', 'no-op': '0' };

const show = (v: unknown) => (v === undefined ? '(absent)' : typeof v === 'string' ? JSON.stringify(v) : JSON.stringify(v));

function fieldLine(action: Action, f: FieldChange): string {
  if (action === 'create') return `      ${f.field} = ${show(f.after)}`;
  return `      ${f.field}: ${show(f.before)} -> ${show(f.after)}`;
}

/** Terraform-style plan text: one block per change, then a summary line. */
/** `sections`: text shown after the changes and before the summary line (provisioning, health). */
/** `provisions`: infrastructure changes the platform will make (the preview), which a plan without resource changes still applies. */
export function renderPlan(plan: Plan, options: { colour: boolean; verbose?: boolean; sections?: string; provisions?: number }): string {
  const paint = (a: Action, s: string) => (options.colour && a !== 'no-op' ? `\x1b[${COLOUR[a]}m${s}\x1b[0m` : s);
  const lines: string[] = [];
  const shown = plan.changes.filter((c) => c.action !== 'no-op');
  for (const c of shown) {
    lines.push(
      paint(
        c.action,
        `${SYMBOL[c.action].padStart(3)} ${subjectOfChange(c)}${c.id ? ` (${c.id})` : ''}: ${c.action}${c.unsupported ? ' (NOT SUPPORTED by the service)' : ''}${c.observeOnly ? ' (observe only)' : ''}`,
      ),
    );
    for (const r of c.reasons) lines.push(`      # ${r}`);
    for (const f of c.changes) lines.push(fieldLine(c.action, f));
    for (const n of c.notes) lines.push(`      # note: ${n}`);
    if (c.unsupported) lines.push(`      # ${c.unsupported}: reported, not applied`);
  }
  for (const c of plan.changes)
    if (c.action === 'no-op' && c.notes.length && options.verbose) lines.push(`    ${subjectOfChange(c)}: ${c.notes.join('; ')}`);
  for (const w of plan.warnings) lines.push(`warning: ${w}`);
  lines.push(...problemLines(plan.errors));
  if (options.sections) lines.push(options.sections.replace(/\n$/, ''));
  const s = plan.summary;
  const summary = shown.length
    ? `Plan: ${s.create} to create, ${s.update} to update, ${s.replace} to replace, ${s.delete} to delete, ${s['no-op']} unchanged${s.unsupported ? ` (${s.unsupported} not supported by the service)` : ''}.`
    : options.provisions
      ? `No resource changes: ${plural(s['no-op'], 'resource')} in sync; ${plural(options.provisions, 'infrastructure change')} to provision (above).`
      : `No changes: ${s['no-op']} resource${s['no-op'] === 1 ? '' : 's'} in sync.`;
  // With errors the plan is not applicable: "No changes" alone read as if all were well.
  const errors = plan.errors.length;
  const roots = rootCauses(plan.errors);
  const above = roots < errors ? `above; ${roots} root cause${roots === 1 ? '' : 's'}` : 'above';
  lines.push(
    errors ? `${summary.replace(/\.$/, '')}; but ${errors} error${errors === 1 ? '' : 's'} (${above}): nothing can be applied.` : summary,
  );
  return `${lines.join('\n')}\n`;
}

/** Which resource an entry is about, as the JSON outputs name it (plan, drift, adopt). */
export function entryJson(e: ResourceEntry) {
  return { kind: e.kind, yaml_kind: e.yamlKind, project: e.project ?? null, name: e.name, id: e.id ?? null };
}

/** One field difference as the JSON outputs show it. */
export function fieldJson(f: FieldChange) {
  return { field: f.field, before: f.before ?? null, after: f.after ?? null, ...(f.sensitive ? { sensitive: true } : {}) };
}

function changeJson(c: PlannedChange) {
  return {
    action: c.action,
    ...entryJson(c),
    ownership: c.ownership,
    fields: c.changes.map(fieldJson),
    reasons: c.reasons,
    notes: c.notes,
    unsupported: c.unsupported ?? null,
    observe_only: !!c.observeOnly,
    health: c.health?.health ?? null,
    health_reason: c.health?.reason ?? null,
  };
}

/** A plan's counts as JSON shows them (`no_op`), for `--output json` and the controller's /status. */
export function summaryJson(plan: Plan) {
  const s = plan.summary;
  return { create: s.create, update: s.update, replace: s.replace, delete: s.delete, no_op: s['no-op'], unsupported: s.unsupported };
}

export function planJson(plan: Plan) {
  return {
    source_id: plan.sourceId,
    summary: summaryJson(plan),
    changes: plan.changes.map(changeJson),
    managed_count: plan.managedCount,
    errors: formatProblems(plan.errors),
    /** The same problems as values: code (docs/guides/errors.md), subject, place, message. */
    problems: plan.errors,
    warnings: plan.warnings,
  };
}

export function applyJson(plan: Plan, result: ApplyResult) {
  return {
    ...planJson(plan),
    converged: result.converged,
    results: result.outcomes.map((o) => ({
      action: o.change.action,
      kind: o.change.kind,
      project: o.change.project ?? null,
      name: o.change.name,
      status: o.status,
      id: o.id ?? o.change.id ?? null,
      message: o.message ?? null,
    })),
  };
}

/**
 * The apply's first summary line: the writes by outcome and, when something failed after them
 * (`problemsAfter`: provisioning, connection tests, health), how many: the apply is complete only
 * when both went well, and only `submitted` when what came after the writes was not checked
 * (`checked` false: --no-wait, or stopped), whatever the platform does with it.
 */
export function renderApplySummary(result: ApplyResult, problemsAfter = 0, checked = true): string {
  const count = (s: string) => result.outcomes.filter((o) => o.status === s).length;
  const outcome = !result.converged || problemsAfter ? 'incomplete' : checked ? 'complete' : 'submitted';
  const after = problemsAfter
    ? `; ${plural(problemsAfter, 'problem')} after the writes (below)`
    : outcome === 'submitted'
      ? '; provisioning and health not checked'
      : '';
  return `Apply ${outcome}: ${count('done')} done, ${count('failed')} failed, ${count('skipped')} skipped, ${count('unsupported')} not supported${after}.\n`;
}

export function driftJson(sourceId: string, entries: DriftEntry[], errors: readonly Problem[]) {
  const by = (t: string) => entries.filter((e) => e.type === t).length;
  return {
    source_id: sourceId,
    summary: { changed: by('changed'), deleted: by('deleted'), orphaned: by('orphaned'), unmanaged: by('unmanaged') },
    drift: entries.map((e) => ({ type: e.type, ...entryJson(e), fields: e.changes.map(fieldJson), detail: e.detail })),
    errors: formatProblems(errors),
    problems: errors,
  };
}

/** drift's note on the secrets it could not compare (drift.ts secretsNotCompared), the first few named. */
export function renderSecretsNotCompared(subjects: string[]): string {
  if (!subjects.length) return '';
  const named = subjects.slice(0, 5).join(', ') + (subjects.length > 5 ? `, and ${subjects.length - 5} more` : '');
  return `note: secrets not compared for ${plural(subjects.length, 'resource')} (${named}): ${subjects.length === 1 ? 'it carries' : 'they carry'} no fingerprint (written outside dpctl, e.g. by Terraform), so whether a secret changed cannot be known; not counted as drift.\n`;
}

export function renderDrift(entries: DriftEntry[]): string {
  if (!entries.length) return 'No drift: the platform matches the config.\n';
  const rows = [
    ['DRIFT', 'KIND', 'PROJECT', 'NAME', 'DETAIL'],
    ...entries.map((e) => [e.type, e.yamlKind, e.project ?? '-', e.name, e.detail]),
  ];
  const widths = rows[0].map((_, i) => maxOf(rows.map((r) => r[i].length)));
  const out = rows.map((r) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd(),
  );
  for (const e of entries)
    for (const f of e.changes)
      out.push(
        `  ${e.yamlKind} ${e.project ? `${e.project}/` : ''}${e.name}: ${f.field}: ${show(f.after)} in config, ${show(f.before)} on the server`,
      );
  out.push(`${entries.length} drifted resource${entries.length === 1 ? '' : 's'}.`);
  return `${out.join('\n')}\n`;
}

// --- Markdown, for pull-request comments (`dpctl plan|drift --output markdown`) ---
// A view of planJson / driftJson, so that the comment says exactly what the JSON output says.

/** GitHub refuses an issue or pull-request comment longer than this. */
export const GITHUB_COMMENT_LIMIT = 65_536;

/** Room kept for the blocks added after a cut: the notes that say what was left out. */
const NOTES_RESERVE = 1_000;

interface MdField {
  field: string;
  before: unknown;
  after: unknown;
  sensitive?: boolean;
}

/** One row of a change table, and its diff. */
interface MdRow {
  /** Emoji and word: the emoji is for the eye, the word for screen readers and plain-text mail. */
  badge: string;
  kind: string;
  project: string | null;
  name: string;
  /** The project whose table lists it (a Project is listed with its own contents). */
  group: string | null;
  /** Table column, when the report has one (drift). */
  detail?: string;
  fields: MdField[];
  /** Reasons and notes: `#` lines of the diff. */
  comments: string[];
  /** A delete: the diff shows the resource as removed. */
  removed?: boolean;
}

interface MdReport {
  title: string;
  /** Markdown, already escaped. */
  headline: string;
  /** Listed as the terminal lists them: the problems that follow from a root cause under it, the first few and a count. */
  errors: readonly Problem[];
  warnings: string[];
  rows: MdRow[];
  actionHeader: string;
  detailHeader?: string;
}

const oneLine = (s: string) => s.replace(/\s*[\r\n]+\s*/g, ' ');
const ENTITY: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' };

/** Text inside an HTML block (the `<summary>` line): GitHub does not parse markdown there, so only HTML is escaped. */
export const escapeHtml = (s: string) => oneLine(s).replace(/[&<>"]/g, (c) => ENTITY[c]);

/**
 * Text in markdown (table cells, list items, headings): HTML as entities, inline markdown
 * backslash-escaped, and a leading block marker (`#`, `-`, `1.`) too, since list items start a block.
 * `|` becomes `\|`, the one escape GFM honours when it splits a table row, even inside `<code>`.
 */
export function escapeMarkdown(s: string): string {
  return oneLine(s)
    .replace(/[&<>]|[\\`*_[\]|~]/g, (c) => ENTITY[c] ?? `\\${c}`)
    .replace(/^([#+\-=])/, '\\$1')
    .replace(/^(\d+)([.)])/, '$1\\$2');
}

/** User-supplied names go in <code>: set apart, and GitHub does not turn `@team` there into a mention. */
const mdCode = (s: string) => `<code>${escapeMarkdown(s)}</code>`;
const htmlCode = (s: string) => `<code>${escapeHtml(s)}</code>`;
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/**
 * Output that stops taking optional blocks near `max` characters. `reserve` is kept free for
 * the blocks forced after a cut (the headline, which follows the errors, and the notes).
 */
class Budget {
  private readonly parts: string[] = [];
  private used = 0;
  constructor(
    private readonly max: number,
    private readonly reserve: number,
  ) {}

  /** Adds a block when it fits; false when it does not. */
  add(block: string): boolean {
    if (this.used + block.length + 1 + this.reserve > this.max) return false;
    this.force(block);
    return true;
  }

  force(block: string): void {
    this.parts.push(block);
    this.used += block.length + 1;
  }

  text(): string {
    return `${this.parts.join('\n')}\n`;
  }
}

/** A GitHub alert (`> [!CAUTION]`) listing items; cut when the budget runs out, saying how many were left out. */
function alertList(out: Budget, type: string, title: string, items: string[], what: string): void {
  out.force(`\n> [!${type}]\n> ${title}\n>`);
  let shown = 0;
  while (shown < items.length && out.add(`> - ${escapeMarkdown(items[shown])}`)) shown++;
  if (shown < items.length)
    out.force(`> - _…and ${plural(items.length - shown, `more ${what}`)}, left out to fit GitHub's comment size limit_`);
}

/** Rows by table: tenant-wide resources (users, ...) first, then projects by name. */
function byGroup(rows: MdRow[]): [string | null, MdRow[]][] {
  const groups = new Map<string | null, MdRow[]>();
  for (const r of rows) appendTo(groups, r.group, r);
  return [...groups].sort(([a], [b]) => (a === null ? -1 : b === null ? 1 : a.localeCompare(b)));
}

/** One table per project; returns how many rows it listed (it stops at the first that does not fit). */
function tables(out: Budget, groups: [string | null, MdRow[]][], r: MdReport): number {
  const columns = [r.actionHeader, 'Kind', 'Name', ...(r.detailHeader ? [r.detailHeader] : [])];
  let listed = 0;
  for (const [group, rows] of groups) {
    // Every block but a table row or list item starts with a blank line: without one, GFM reads the next line as one more row.
    const head = `\n#### ${group === null ? 'Tenant-wide' : `Project ${mdCode(group)}`}\n\n| ${columns.join(' | ')} |\n|${columns.map(() => '---').join('|')}|`;
    if (!out.add(head)) return listed;
    for (const row of rows) {
      const cells = [row.badge, escapeMarkdown(row.kind), mdCode(row.name), ...(r.detailHeader ? [escapeMarkdown(row.detail ?? '')] : [])];
      if (!out.add(`| ${cells.join(' | ')} |`)) return listed;
      listed++;
    }
  }
  return listed;
}

/** The ```diff body of a details block: `#` reasons and notes, `-` before, `+` after; secrets stay masked. */
function diffLines(row: MdRow): string[] {
  // Lines start with `#`, `-` or `+`, so no value can close the fence early (and oneLine keeps values on their line).
  const lines = row.comments.map((c) => `# ${oneLine(c)}`);
  if (row.removed) lines.push(`- ${oneLine(`${row.kind} ${row.project ? `${row.project}/` : ''}${row.name}`)}`);
  for (const f of row.fields) {
    const value = (v: unknown) => (f.sensitive ? SENSITIVE : oneLine(show(v)));
    // planJson has null for "absent": a created field or one set where there was nothing has no `-` line.
    if (f.before !== null) lines.push(`- ${oneLine(f.field)} = ${value(f.before)}`);
    lines.push(`+ ${oneLine(f.field)} = ${value(f.after)}`);
  }
  return lines;
}

function detailsBlock(row: MdRow): string {
  const subject = `${row.project ? `${row.project}/` : ''}${row.name}`;
  const summary = `${row.badge} ${escapeHtml(row.kind)} ${htmlCode(subject)}`;
  return `\n<details><summary>${summary}</summary>\n\n\`\`\`diff\n${diffLines(row).join('\n')}\n\`\`\`\n\n</details>`;
}

/** The whole comment: title, errors, headline, warnings, tables, then a collapsed diff per row. */
function renderReport(r: MdReport, max: number): string {
  const out = new Budget(max, NOTES_RESERVE + r.headline.length + 1);
  out.force(`### ${r.title}`);
  if (r.errors.length)
    alertList(
      out,
      'CAUTION',
      `**${plural(r.errors.length, 'error')}: nothing can be applied until ${r.errors.length === 1 ? 'it is' : 'they are'} fixed.**`,
      problemLines(r.errors, ''),
      'error',
    );
  out.force(`\n${r.headline}`);
  if (r.warnings.length) alertList(out, 'WARNING', `**${plural(r.warnings.length, 'warning')}**`, r.warnings, 'warning');
  const groups = byGroup(r.rows);
  const listed = tables(out, groups, r);
  if (listed < r.rows.length)
    out.force(`\n_…${listed ? `and ${r.rows.length - listed} more` : `${r.rows.length}`} not listed, to fit GitHub's comment size limit._`);
  // Details only for rows that have something to show, and only when every row is listed (a detail without its row would confuse).
  const withDiff =
    listed === r.rows.length
      ? groups.flatMap(([, rows]) => rows).filter((row) => row.fields.length || row.comments.length || row.removed)
      : [];
  let left = 0;
  // A block that does not fit is skipped, not the end: one huge create should not hide every small diff after it.
  for (const row of withDiff) if (!out.add(detailsBlock(row))) left++;
  if (left)
    out.force(
      `\n_Details of ${left} of ${withDiff.length} resources left out to fit GitHub's ${max.toLocaleString('en-US')}-character comment limit; run the command locally for the full diff._`,
    );
  return out.text();
}

const PLAN_BADGE: Record<Action, string> = {
  create: '➕ create',
  update: '✏️ update',
  replace: '♻️ replace',
  delete: '🗑️ delete',
  'no-op': '',
};

/** A Project's own row goes in its table, with the resources inside it. */
const groupOf = (kind: string, project: string | null, name: string) => project ?? (kind === SCOPE_CONTAINER.kind ? name : null);

/** `dpctl plan --output markdown`: a pull-request comment of planJson, at most `maxLength` characters. */
export function renderPlanMarkdown(plan: Plan, options: { maxLength?: number; provisions?: number } = {}): string {
  const json = planJson(plan);
  const s = json.summary;
  const rows = json.changes
    .filter((c) => c.action !== 'no-op')
    .map((c): MdRow => ({
      badge: `${PLAN_BADGE[c.action]}${c.unsupported ? ' ⚠️ not supported' : ''}`,
      kind: c.yaml_kind,
      project: c.project,
      name: c.name,
      group: groupOf(c.kind, c.project, c.name),
      fields: c.fields,
      comments: [
        ...c.reasons,
        ...c.notes.map((n) => `note: ${n}`),
        ...(c.unsupported ? [`NOT SUPPORTED by the service: ${c.unsupported}; reported, not applied`] : []),
      ],
      removed: c.action === 'delete',
    }));
  const counts = `**Plan:** ${s.create} to create, ${s.update} to update, ${s.replace} to replace, ${s.delete} to delete, ${s.no_op} unchanged${s.unsupported ? ` (${s.unsupported} not supported by the service)` : ''}`;
  const none = options.provisions
    ? `**No resource changes.** ${plural(s.no_op, 'resource')} in sync; ${plural(options.provisions, 'infrastructure change')} to provision (below)`
    : `**No changes.** ${plural(s.no_op, 'resource')} in sync`;
  const headline = `${rows.length ? counts : none} · source ${mdCode(json.source_id)}`;
  return renderReport(
    { title: 'dpctl plan', headline, errors: plan.errors, warnings: json.warnings, rows, actionHeader: 'Action' },
    options.maxLength ?? GITHUB_COMMENT_LIMIT,
  );
}

const DRIFT_BADGE: Record<string, string> = {
  changed: '✏️ changed',
  deleted: '❌ deleted',
  orphaned: '🗑️ orphaned',
  unmanaged: '❔ unmanaged',
};

/** `dpctl drift --output markdown`: a comment of driftJson; a diff is `-` on the server, `+` in the config. */
export function renderDriftMarkdown(
  sourceId: string,
  entries: DriftEntry[],
  errors: readonly Problem[],
  options: { maxLength?: number } = {},
): string {
  const json = driftJson(sourceId, entries, errors);
  const s = json.summary;
  const rows = json.drift.map((e): MdRow => ({
    badge: DRIFT_BADGE[e.type],
    kind: e.yaml_kind,
    project: e.project,
    name: e.name,
    group: groupOf(e.kind, e.project, e.name),
    detail: e.detail,
    fields: e.fields,
    comments: e.fields.length ? ['- on the server, + in the config'] : [],
  }));
  const counts = `**Drift:** ${s.changed} changed, ${s.deleted} deleted, ${s.orphaned} orphaned, ${s.unmanaged} unmanaged`;
  const headline = `${rows.length ? counts : '**No drift.** The platform matches the config.'} · source ${mdCode(json.source_id)}`;
  return renderReport(
    { title: 'dpctl drift', headline, errors, warnings: [], rows, actionHeader: 'Drift', detailHeader: 'Detail' },
    options.maxLength ?? GITHUB_COMMENT_LIMIT,
  );
}

/** An invalid config as a comment: nothing was planned, but the pull request's author needs to see why. */
export function renderConfigErrorsMarkdown(
  command: 'plan' | 'drift',
  errors: readonly Problem[],
  options: { maxLength?: number } = {},
): string {
  const headline = `**Invalid configuration:** nothing was ${command === 'plan' ? 'planned' : 'compared'}.`;
  return renderReport(
    { title: `dpctl ${command}`, headline, errors, warnings: [], rows: [], actionHeader: 'Action' },
    options.maxLength ?? GITHUB_COMMENT_LIMIT,
  );
}
