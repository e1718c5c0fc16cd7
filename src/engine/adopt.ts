/**
 * `dpctl adopt`: marks existing resources that match the config as managed by this source
 * (label dpctl.dev/managed-by), after checking that the plan for each is a no-op apart from
 * ownership. Nothing is created, and a resource that differs is reported and left alone.
 */
import { maxOf } from '../collections.js';
import { entryJson } from './format.js';
import { formatProblem, formatProblems, type Problem } from './problems.js';
import type { DataPlatformClient } from '../client/index.js';
import { ENGINE_LABELS, hasLabels, LABELS_FIELD, MANAGED_BY_LABEL, SECRETS_SHA_LABEL, type FieldChange } from './diff.js';
import { preparePlan, type EngineOptions } from './index.js';
import { fingerprintKeyOf, isKeyed, unkeyedFingerprintWarning, unkeyedWarningFor } from './fingerprint.js';
import { mapLimit } from './observe.js';
import { subjectOfChange, type PlannedChange, type ResourceEntry } from './plan.js';

export type AdoptStatus =
  /** Labelled now. */
  | 'adopted'
  /** Already labelled by this source. */
  | 'owned'
  /** Matches, but the kind has no labels to record ownership in (users). */
  | 'matches'
  /** Differs from the config: not adopted. */
  | 'differs'
  /** Declared, not on the server: not created. */
  | 'missing'
  /** The label write failed. */
  | 'failed';

/** `changes`, for `differs`: what the plan would change (secrets excluded: they cannot be compared). */
export interface AdoptEntry extends ResourceEntry {
  status: AdoptStatus;
  detail: string;
}

export interface AdoptOptions extends EngineOptions {
  /**
   * Secrets cannot be read back, so they cannot be checked. Without this, adopted resources
   * get no fingerprint and the next apply sets their secrets again; with it, the fingerprint of
   * the configured values is written as if the live values were those.
   */
  trustSecrets?: boolean;
  /** Check and report only; write nothing. */
  dryRun?: boolean;
}

export interface AdoptResult {
  sourceId: string;
  entries: AdoptEntry[];
  /** Plan errors (a resource managed by another source, an unresolved reference): nothing was written. */
  errors: Problem[];
  warnings: string[];
  /** --dry-run: nothing was labelled; `adopted` means "would be adopted". */
  dryRun?: boolean;
}

const isEngineLabelChange = (c: FieldChange) => ENGINE_LABELS.some((l) => c.field === `${LABELS_FIELD}.${l}`);

/** A change's entry, as one literal (see drift.ts entryOf for why not a spread of shared fields). */
const entryOf = (c: PlannedChange, status: AdoptEntry['status'], changes: AdoptEntry['changes'], detail: string): AdoptEntry => ({
  kind: c.kind,
  yamlKind: c.yamlKind,
  project: c.project,
  name: c.name,
  id: c.id,
  status,
  changes,
  detail,
});

/**
 * Plans the config as if adopting (so fields the config leaves out that would be cleared count
 * as differences), then labels every existing resource whose only planned change is ownership.
 */
export async function adoptResources(client: DataPlatformClient, paths: string[], options: AdoptOptions): Promise<AdoptResult> {
  const { plan, state } = await preparePlan(client, paths, { ...options, prune: false, adopt: true });
  // Adopt writes no secret, so the plan's warning about the fingerprints an apply would write is
  // not adopt's: it warns only of those it records itself (--trust-secrets, below).
  const applyWouldWrite = unkeyedFingerprintWarning(plan.changes, fingerprintKeyOf(options.env ?? process.env));
  const result: AdoptResult = {
    sourceId: options.sourceId,
    entries: [],
    errors: [...plan.errors],
    warnings: plan.warnings.filter((w) => w !== applyWouldWrite),
    dryRun: options.dryRun,
  };
  if (plan.errors.length) return result;
  const toLabel: { change: PlannedChange; entry: AdoptEntry; labels: Record<string, string> }[] = [];
  for (const c of plan.changes) {
    if (c.action === 'create') {
      result.entries.push(entryOf(c, 'missing', [], 'not on the server (not created: run apply)'));
      continue;
    }
    const differences = c.changes.filter((f) => !f.sensitive && !isEngineLabelChange(f));
    if (c.action === 'replace' || differences.length) {
      const detail = c.action === 'replace' ? `needs replace: ${c.reasons.join('; ')}` : differences.map((f) => f.field).join(', ');
      result.entries.push(entryOf(c, 'differs', differences, `${detail}: not adopted`));
      continue;
    }
    const d = c.doc!.descriptor;
    if (!hasLabels(d)) {
      const secretNote = c.doc!.secrets.length ? '; its secrets are not compared (set on create only)' : '';
      result.entries.push(entryOf(c, 'matches', [], `matches the config; a ${c.yamlKind} has no labels to record ownership${secretNote}`));
      continue;
    }
    const live = (c.live!.object[LABELS_FIELD] as Record<string, string> | undefined) ?? {};
    const wanted: Record<string, string> = { ...live, [MANAGED_BY_LABEL]: options.sourceId };
    const hasSecrets = c.doc!.secrets.length > 0;
    let detail = c.ownership === 'owned' ? 'already managed by this source' : 'matches the config';
    if (hasSecrets) {
      if (options.trustSecrets) {
        wanted[SECRETS_SHA_LABEL] = c.labels![SECRETS_SHA_LABEL];
        if (live[SECRETS_SHA_LABEL] !== wanted[SECRETS_SHA_LABEL])
          detail += '; secrets not checked (write-only): trusted, fingerprint of the configured values recorded';
      } else if (live[SECRETS_SHA_LABEL] !== c.labels![SECRETS_SHA_LABEL]) {
        detail += '; secrets not checked (write-only): the next apply sets them again (--trust-secrets records their fingerprint instead)';
      }
    }
    const changed = Object.keys(wanted).some((k) => wanted[k] !== live[k]);
    const entry = entryOf(c, c.ownership === 'owned' && !changed ? 'owned' : 'adopted', [], detail);
    result.entries.push(entry);
    if (changed) toLabel.push({ change: c, entry, labels: wanted });
  }
  const unkeyed = unkeyedWarningFor(
    toLabel.filter((l) => l.labels[SECRETS_SHA_LABEL] !== undefined && !isKeyed(l.labels[SECRETS_SHA_LABEL])).length,
  );
  if (unkeyed) result.warnings.push(unkeyed);
  if (!options.dryRun) {
    await mapLimit(toLabel, options.concurrency ?? 4, async ({ change, entry, labels }) => {
      const projectId = change.project !== undefined ? state.projects.get(change.project)?.id : undefined;
      try {
        await client.resourcesOf(change.kind, { projectId }).update(change.id!, { [LABELS_FIELD]: labels });
      } catch (err) {
        entry.status = 'failed';
        entry.detail = `${subjectOfChange(change)}: labelling failed: ${(err as Error).message}`;
      }
    });
  }
  return result;
}

/** 0 every declared resource adopted (or already owned, or matching), 2 something differs or is missing, 1 errors. */
export function adoptExitCode(result: AdoptResult): number {
  if (result.errors.length || result.entries.some((e) => e.status === 'failed')) return 1;
  return result.entries.some((e) => e.status === 'differs' || e.status === 'missing') ? 2 : 0;
}

const show = (v: unknown) => (v === undefined ? '(absent)' : JSON.stringify(v));

export function renderAdopt(result: AdoptResult): string {
  const rows = [
    ['STATUS', 'KIND', 'PROJECT', 'NAME', 'DETAIL'],
    ...result.entries.map((e) => [e.status, e.yamlKind, e.project ?? '-', e.name, e.detail]),
  ];
  const widths = rows[0].map((_, i) => maxOf(rows.map((r) => r[i].length)));
  const out = result.entries.length
    ? rows.map((r) =>
        r
          .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i])))
          .join('  ')
          .trimEnd(),
      )
    : [];
  if (result.dryRun) out.unshift('Dry run: nothing is labelled; "adopted" below means it would be.');
  for (const e of result.entries)
    for (const f of e.changes)
      out.push(
        `  ${e.yamlKind} ${e.project ? `${e.project}/` : ''}${e.name}: ${f.field}: ${show(f.after)} in config, ${show(f.before)} on the server`,
      );
  for (const w of result.warnings) out.push(`warning: ${w}`);
  for (const e of result.errors) out.push(`error: ${formatProblem(e)}`);
  const count = (s: AdoptStatus) => result.entries.filter((e) => e.status === s).length;
  // A dry run must not read like the real one: it says so, and what it would do.
  out.push(
    result.errors.length
      ? 'Nothing adopted: the plan has errors.'
      : `Adopt${result.dryRun ? ' (dry run: nothing written)' : ''}: ${count('adopted')} ${result.dryRun ? 'would be adopted' : 'adopted'}, ${count('owned')} already owned, ${count('matches')} matching without labels, ${count('differs')} differ, ${count('missing')} missing, ${count('failed')} failed.`,
  );
  return `${out.join('\n')}\n`;
}

export function adoptJson(result: AdoptResult) {
  return {
    source_id: result.sourceId,
    dry_run: !!result.dryRun,
    entries: result.entries.map((e) => ({
      status: e.status,
      ...entryJson(e),
      fields: e.changes.map((f) => ({ field: f.field, before: f.before ?? null, after: f.after ?? null })),
      detail: e.detail,
    })),
    errors: formatProblems(result.errors),
    problems: result.errors,
    warnings: result.warnings,
  };
}
