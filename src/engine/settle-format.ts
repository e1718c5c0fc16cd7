import type { ApplyResult } from './apply.js';
import { applyJson, escapeMarkdown } from './format.js';
import { healthCounts, unhealthy, type HealthEntry } from './health.js';
import { subjectOfChange, type Plan } from './plan.js';
import type { ProjectProvisioning } from './provisioning.js';
import type { SettleResult } from './settle.js';

/**
 * Text and JSON of what a plan says about provisioning and health, and of what an apply found
 * after it wrote (settle.ts). Kept apart from format.ts, which renders the resource changes.
 */

const SYMBOL = { create: '+', update: '~', delete: '-' } as const;
const VERB = { create: 'provision', update: 'change', delete: 'destroy' } as const;
const NEVER_RUN = 'never run (untested)';
const NEVER_RUN_HINT = (n: number) =>
  `never run: nothing has shown yet that ${n === 1 ? 'it works' : 'they work'}; \`dpctl apply --test-connections\` tests the connection now, the first run does anyway.`;

/**
 * Why a change is in the platform's plan already (origin platform): pending, or failed before and
 * provisioned again by the apply (it said "already pending" of a warehouse whose provisioning failed).
 */
function platformOrigin(plan: Plan | undefined): (project: string, name: string) => string {
  const failed = new Set(plan?.changes.filter((c) => c.health?.health === 'degraded').map((c) => `${c.project}\0${c.name}`));
  return (project, name) =>
    failed.has(`${project}\0${name}`) ? 'failed on the platform: the apply provisions it again' : 'already pending on the platform';
}

/** How many infrastructure changes the previews expect (a plan without resource changes still has these to apply). */
export const provisioningCount = (previews: ProjectProvisioning[]) => previews.reduce((n, p) => n + p.expected.length, 0);

/** The nested "the platform will provision" section of a plan, per project. */
export function renderProvisioningPreview(previews: ProjectProvisioning[], plan?: Plan): string {
  const lines: string[] = [];
  const origin = platformOrigin(plan);
  for (const p of previews) {
    if (!p.expected.length && !p.note) continue;
    lines.push(`Infrastructure the platform will provision in project ${p.project} (after this apply):`);
    for (const e of p.expected) {
      const fields = e.action === 'update' && e.changed_fields.length ? ` (${e.changed_fields.join(', ')})` : '';
      const pending = e.origin === 'platform' ? ` # ${origin(p.project, e.name)}` : '';
      lines.push(`  ${SYMBOL[e.action]} ${VERB[e.action]} ${e.resource_type ? `${e.resource_type} ` : ''}${e.name}${fields}${pending}`);
    }
    if (p.note) lines.push(`  # ${p.note}`);
  }
  return lines.length ? `${lines.join('\n')}\n` : '';
}

/**
 * Never-run resources a plan's text names, at most: after an apply of 10,000 new connectors every
 * one has never run, and the plan of the next commit should not print 10,000 lines about it.
 */
export const NEVER_RUN_LISTED = 10;

/** What the health section of a plan (and of drift) lists: the resources not healthy, then those healthy only because they have never run. */
function observedHealth(plan: Plan) {
  const entries = unhealthy(plan);
  // Counted, and only the listed ones named: a subject per change is 10,000 strings for 10 lines.
  const neverRun = { count: 0, listed: [] as string[] };
  for (const c of plan.changes) {
    if (c.health?.health !== 'healthy' || !c.health.neverRun) continue;
    if (neverRun.count++ < NEVER_RUN_LISTED) neverRun.listed.push(subjectOfChange(c));
  }
  const counts = [
    entries.length ? healthCounts(entries) : '',
    neverRun.count ? `${neverRun.count.toLocaleString('en-US')} ${NEVER_RUN}` : '',
  ];
  return { entries, neverRun, counts: counts.filter(Boolean).join(', ') };
}

/**
 * The plan's (and drift's) health section: each resource whose observed health is not healthy,
 * then those healthy only because they have never run (nothing has tried their connection yet),
 * the first NEVER_RUN_LISTED of them by name and the rest counted (`--output json` has them all).
 */
export function renderPlanHealth(plan: Plan): string {
  const { entries, neverRun, counts } = observedHealth(plan);
  if (!counts) return '';
  const lines = [`Health (as observed): ${counts}`];
  for (const e of entries) lines.push(`  ! ${e.subject}: ${e.health}: ${e.reason}`);
  for (const subject of neverRun.listed) lines.push(`  ? ${subject}: ${NEVER_RUN}`);
  const more = neverRun.count - neverRun.listed.length;
  if (more > 0) lines.push(`  ? and ${more.toLocaleString('en-US')} more ${NEVER_RUN} (\`--output json\`: health[].never_run)`);
  if (neverRun.count) lines.push(`  ${NEVER_RUN_HINT(neverRun.count)}`);
  return `${lines.join('\n')}\n`;
}

const healthJson = (e: Pick<HealthEntry, 'kind' | 'project' | 'name' | 'health' | 'reason' | 'neverRun'>) => ({
  kind: e.kind,
  project: e.project ?? null,
  name: e.name,
  health: e.health,
  reason: e.reason ?? null,
  never_run: !!e.neverRun,
});

export function provisioningPreviewJson(previews: ProjectProvisioning[]) {
  return previews.map((p) => ({ project: p.project, kind: p.descriptor.kind, changes: p.expected, note: p.note ?? null }));
}

export function planHealthJson(plan: Plan) {
  return plan.changes.filter((c) => c.health).map((c) => healthJson({ kind: c.kind, project: c.project, name: c.name, ...c.health! }));
}

/**
 * `dpctl apply -o json`: the plan, each write's outcome and what came after the writes.
 * `converged` is true only when the writes are all done, and the provisioning and health were
 * checked (`health_checked`: not with --no-wait, nor when stopped) and nothing failed after them
 * (provisioning, connection tests, health); `writes_done` is the first half alone.
 */
export function applyReportJson(plan: Plan, result: ApplyResult, s: SettleResult) {
  return {
    ...applyJson(plan, result),
    ...settleJson(s),
    writes_done: result.converged,
    health_checked: s.checked,
    converged: result.converged && s.checked && !s.failures.length,
  };
}

export function settleJson(s: SettleResult) {
  return {
    provisioning: s.provisioning.map((p) => ({
      project: p.project,
      run_id: p.run?.id ?? null,
      status: p.run?.status ?? null,
      changes: p.changes.map((c) => ({ action: c.action, name: c.name })),
      failures: p.failures,
    })),
    connection_tests: s.tests.map((t) => ({ subject: t.subject, success: t.success, message: t.message })),
    health: s.health.map(healthJson),
    failures: s.failures,
  };
}

const TEST_FAILED = 'failing its connection test';

/**
 * A declared resource's state after the apply, in words: its health, except that a healthy one
 * whose connection test failed is not called healthy, nor is one that has never run and was not
 * tested (a connector never synced: its credentials have not been tried).
 */
function settledState(h: HealthEntry, tested: Map<string, boolean>): string {
  const test = tested.get(h.subject);
  if (test === false) return TEST_FAILED;
  return h.health === 'healthy' && h.neverRun && test !== true ? NEVER_RUN : h.health;
}

/** The health summary after an apply ("Health: 4 healthy, 1 never run (untested)."), and what the untested ones need. */
function healthLines(s: SettleResult): string[] {
  if (!s.health.length) return [];
  const tested = new Map(s.tests.map((t) => [t.subject, t.success]));
  const counts = new Map<string, number>();
  for (const h of s.health) {
    const state = settledState(h, tested);
    counts.set(state, (counts.get(state) ?? 0) + 1);
  }
  if (counts.size === 1 && counts.has('healthy')) return [`Health: all ${s.health.length} healthy.`];
  // Healthy first, then the rest as met: "1 healthy, 1 never run (untested)".
  const ordered = [...counts].sort(([a], [b]) => Number(b === 'healthy') - Number(a === 'healthy'));
  const lines = [`Health: ${ordered.map(([state, n]) => `${n} ${state}`).join(', ')}.`];
  const untested = counts.get(NEVER_RUN);
  if (untested) lines.push(`  ${NEVER_RUN_HINT(untested)}`);
  return lines;
}

/** The lines after an apply: what failed after the writes, and the health summary. */
export function renderSettle(s: SettleResult): string {
  const lines: string[] = [];
  for (const f of s.failures) lines.push(`error: ${f}`);
  lines.push(...healthLines(s));
  if (s.failures.length)
    lines.push(
      // "Apply complete" above counts the writes; this says the platform does not work as declared yet.
      // Running apply again does not fix a failed sync or test: each line above says what failed.
      `Not done: the writes are done, but ${s.failures.length} problem${s.failures.length === 1 ? '' : 's'} (above) remain${s.failures.length === 1 ? 's' : ''}; apply exits 1 until ${s.failures.length === 1 ? 'it is' : 'they are'} fixed.`,
    );
  return lines.length ? `${lines.join('\n')}\n` : '';
}

/** At most this many lines per markdown section: a PR comment has a size limit (the plan's own table is capped in format.ts). */
const MARKDOWN_LINES = 50;

/** `total`: how many there are when `lines` holds only the first of them. */
const capped = (lines: string[], max = MARKDOWN_LINES, total = lines.length) =>
  total > max ? [...lines.slice(0, max), `- _…and ${total - max} more; run the command locally for all._`] : lines;

/** The provisioning preview and the health section, as markdown after the comment of a plan (or of drift, with no preview). */
export function renderSettleMarkdown(previews: ProjectProvisioning[], plan: Plan): string {
  const out: string[] = [];
  const origin = platformOrigin(plan);
  const provisioning = previews.flatMap((p) =>
    p.expected.map(
      (e) =>
        `- ${SYMBOL[e.action]} ${VERB[e.action]} ${escapeMarkdown(`${p.project}/${e.name}`)}${e.origin === 'platform' ? ` _(${origin(p.project, e.name)})_` : ''}`,
    ),
  );
  if (provisioning.length) out.push('', '#### Infrastructure the platform will provision', '', ...capped(provisioning));
  const { entries, neverRun, counts } = observedHealth(plan);
  if (counts) {
    out.push('', `#### Health (as observed): ${counts}`, '');
    out.push(...capped(entries.map((e) => `- ⚠️ ${escapeMarkdown(e.subject)}: **${e.health}**: ${escapeMarkdown(e.reason ?? '')}`)));
    out.push(
      ...capped(
        neverRun.listed.map((subject) => `- ❔ ${escapeMarkdown(subject)}: ${NEVER_RUN}`),
        NEVER_RUN_LISTED,
        neverRun.count,
      ),
    );
    if (neverRun.count) out.push('', `_${NEVER_RUN_HINT(neverRun.count)}_`); // our own text: its backticks are code
  }
  return out.length ? `${out.join('\n')}\n` : '';
}
