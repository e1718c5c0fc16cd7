import type { ApplyResult } from './apply.js';
import type { FieldChange } from './diff.js';
import type { DriftEntry } from './drift.js';
import { subjectOfChange, type Action, type Plan, type PlannedChange } from './plan.js';

const SYMBOL: Record<Action, string> = { create: '+', update: '~', replace: '-/+', delete: '-', 'no-op': ' ' };
const COLOUR: Record<Action, string> = { create: '32', update: '33', replace: '35', delete: '31', 'no-op': '0' };

const show = (v: unknown) => (v === undefined ? '(absent)' : typeof v === 'string' ? JSON.stringify(v) : JSON.stringify(v));

function fieldLine(action: Action, f: FieldChange): string {
  if (action === 'create') return `      ${f.field} = ${show(f.after)}`;
  return `      ${f.field}: ${show(f.before)} -> ${show(f.after)}`;
}

/** Terraform-style plan text: one block per change, then a summary line. */
export function renderPlan(plan: Plan, options: { colour: boolean; verbose?: boolean }): string {
  const paint = (a: Action, s: string) => (options.colour && a !== 'no-op' ? `\x1b[${COLOUR[a]}m${s}\x1b[0m` : s);
  const lines: string[] = [];
  const shown = plan.changes.filter((c) => c.action !== 'no-op');
  for (const c of shown) {
    lines.push(paint(c.action, `${SYMBOL[c.action].padStart(3)} ${subjectOfChange(c)}${c.id ? ` (${c.id})` : ''}: ${c.action}${c.unsupported ? ' (NOT SUPPORTED by the service)' : ''}`));
    for (const r of c.reasons) lines.push(`      # ${r}`);
    for (const f of c.changes) lines.push(fieldLine(c.action, f));
    for (const n of c.notes) lines.push(`      # note: ${n}`);
    if (c.unsupported) lines.push(`      # ${c.unsupported}: reported, not applied`);
  }
  for (const c of plan.changes) if (c.action === 'no-op' && c.notes.length && options.verbose) lines.push(`    ${subjectOfChange(c)}: ${c.notes.join('; ')}`);
  for (const w of plan.warnings) lines.push(`warning: ${w}`);
  for (const e of plan.errors) lines.push(`error: ${e}`);
  const s = plan.summary;
  lines.push(
    shown.length
      ? `Plan: ${s.create} to create, ${s.update} to update, ${s.replace} to replace, ${s.delete} to delete, ${s['no-op']} unchanged${s.unsupported ? ` (${s.unsupported} not supported by the service)` : ''}.`
      : `No changes: ${s['no-op']} resource${s['no-op'] === 1 ? '' : 's'} in sync.`,
  );
  return `${lines.join('\n')}\n`;
}

function changeJson(c: PlannedChange) {
  return {
    action: c.action,
    kind: c.kind,
    yaml_kind: c.yamlKind,
    project: c.project ?? null,
    name: c.name,
    id: c.id ?? null,
    ownership: c.ownership,
    fields: c.changes.map((f) => ({ field: f.field, before: f.before ?? null, after: f.after ?? null, ...(f.sensitive ? { sensitive: true } : {}) })),
    reasons: c.reasons,
    notes: c.notes,
    unsupported: c.unsupported ?? null,
  };
}

export function planJson(plan: Plan) {
  return {
    source_id: plan.sourceId,
    summary: { create: plan.summary.create, update: plan.summary.update, replace: plan.summary.replace, delete: plan.summary.delete, no_op: plan.summary['no-op'], unsupported: plan.summary.unsupported },
    changes: plan.changes.map(changeJson),
    managed_count: plan.managedCount,
    errors: plan.errors,
    warnings: plan.warnings,
  };
}

export function applyJson(plan: Plan, result: ApplyResult) {
  return {
    ...planJson(plan),
    converged: result.converged,
    results: result.outcomes.map((o) => ({ action: o.change.action, kind: o.change.kind, project: o.change.project ?? null, name: o.change.name, status: o.status, id: o.id ?? o.change.id ?? null, message: o.message ?? null })),
  };
}

export function renderApplySummary(result: ApplyResult): string {
  const count = (s: string) => result.outcomes.filter((o) => o.status === s).length;
  return `Apply ${result.converged ? 'complete' : 'incomplete'}: ${count('done')} done, ${count('failed')} failed, ${count('skipped')} skipped, ${count('unsupported')} not supported.\n`;
}

export function driftJson(sourceId: string, entries: DriftEntry[], errors: string[]) {
  const by = (t: string) => entries.filter((e) => e.type === t).length;
  return {
    source_id: sourceId,
    summary: { changed: by('changed'), deleted: by('deleted'), orphaned: by('orphaned'), unmanaged: by('unmanaged') },
    drift: entries.map((e) => ({ type: e.type, kind: e.kind, yaml_kind: e.yamlKind, project: e.project ?? null, name: e.name, id: e.id ?? null, fields: e.changes.map((f) => ({ field: f.field, before: f.before ?? null, after: f.after ?? null, ...(f.sensitive ? { sensitive: true } : {}) })), detail: e.detail })),
    errors,
  };
}

export function renderDrift(entries: DriftEntry[]): string {
  if (!entries.length) return 'No drift: the platform matches the config.\n';
  const rows = [['DRIFT', 'KIND', 'PROJECT', 'NAME', 'DETAIL'], ...entries.map((e) => [e.type, e.yamlKind, e.project ?? '-', e.name, e.detail])];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const out = rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ').trimEnd());
  for (const e of entries) for (const f of e.changes) out.push(`  ${e.yamlKind} ${e.project ? `${e.project}/` : ''}${e.name}: ${f.field}: ${show(f.after)} in config, ${show(f.before)} on the server`);
  out.push(`${entries.length} drifted resource${entries.length === 1 ? '' : 's'}.`);
  return `${out.join('\n')}\n`;
}
