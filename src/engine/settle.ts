import { testConnectionOf, type DataPlatformClient } from '../client/index.js';
import { SCOPE_CONTAINER } from '../kinds/index.js';
import type { ApplyResult } from './apply.js';
import { healthEntry, waitForHealth, type HealthEntry, type HealthWaitOptions } from './health.js';
import { mapLimit, type LiveState } from './observe.js';
import { subjectOfChange, type Plan, type PlannedChange } from './plan.js';
import { provisionAll, type ProjectProvisioning, type ProvisioningOutcome } from './provisioning.js';

/**
 * After the API accepted an apply: make it work and find out whether it does. Provision what
 * the platform provisions (x-provisioning), test the connections of what changed
 * (x-test-action, with --test-connections), then wait until what the config declares is no
 * longer progressing and report what is not healthy (x-health). Any failure makes the apply
 * fail, after everything else was applied.
 */

export interface ConnectionTestOutcome {
  /** The resource's key, as its planned change's (`PlannedChange.key`). */
  key: string;
  subject: string;
  success: boolean;
  message: string;
}

export interface SettleOptions {
  previews: ProjectProvisioning[];
  /** Wait for provisioning and health (dpctl apply --wait, the default). */
  wait: boolean;
  /** Epoch ms: the end of --wait-timeout. */
  deadline: number;
  testConnections: boolean;
  /**
   * Which unchanged resources that nothing has shown to work are tested (default: all of them).
   * The controller tests each once per process and a failed one again after its back-off, not on
   * every run.
   */
  testUnproven?: (c: PlannedChange) => boolean;
  concurrency: number;
  signal?: AbortSignal;
  onProgress?: (line: string) => void;
  /** Names the phase under way (provisioning, testing connections, waiting for health), for a live status line. */
  onPhase?: (label: string) => void;
  pollMs?: number;
}

export interface SettleResult {
  provisioning: ProvisioningOutcome[];
  tests: ConnectionTestOutcome[];
  /** Final health of each declared resource with a health rule (empty without wait). */
  health: HealthEntry[];
  /** What makes the apply fail, one line each: resource first, then the platform's reason. */
  failures: string[];
  /**
   * Whether the provisioning and health were waited for and checked (`wait`). Without, nothing is
   * known of them: the apply is not `converged`, only submitted.
   */
  checked: boolean;
}

/** Project name -> id after the apply: the observed ones and those the apply created. */
export function projectIdsAfter(state: LiveState, result: ApplyResult): Map<string, string> {
  const ids = new Map([...state.projects].map(([name, p]) => [name, p.id]));
  for (const o of result.outcomes) if (o.change.kind === SCOPE_CONTAINER.kind && o.id) ids.set(o.change.name, o.id);
  return ids;
}

/** Declared resources the apply wrote successfully, or left alone (no-op). */
function settledChanges(plan: Plan, result: ApplyResult): PlannedChange[] {
  const failed = new Set(result.outcomes.filter((o) => o.status !== 'done').map((o) => o.change));
  return plan.changes.filter((c) => c.action !== 'delete' && c.doc && !failed.has(c));
}

export async function settle(
  client: DataPlatformClient,
  plan: Plan,
  result: ApplyResult,
  state: LiveState,
  o: SettleOptions,
): Promise<SettleResult> {
  const projectIds = projectIdsAfter(state, result);
  if (o.previews.length) o.onPhase?.('provisioning');
  const provisioning = await provisionAll(client, o.previews, {
    projectIds,
    deadline: o.deadline,
    wait: o.wait,
    signal: o.signal,
    onProgress: o.onProgress,
    pollMs: o.pollMs,
  });
  if (o.testConnections) o.onPhase?.('testing connections');
  const tests = o.testConnections ? await testConnections(client, plan, result, projectIds, o) : [];
  if (o.wait) o.onPhase?.('waiting for health');
  const health = o.wait
    ? await healthAfter(client, settledChanges(plan, result), provisioning.length > 0, {
        projectIds,
        deadline: o.deadline,
        concurrency: o.concurrency,
        signal: o.signal,
        onProgress: o.onProgress,
        pollMs: o.pollMs,
      })
    : [];
  // A failed provisioning also leaves its resource degraded: report it once, with the platform's reason.
  const reported = new Set(provisioning.flatMap((p) => p.failures.map((f) => `${p.project}/${f.name}`)));
  const unhealthy = health.filter((h) => !reported.has(`${h.project}/${h.name}`));
  const failures = [
    ...provisioning.flatMap((p) => p.failures.map((f) => `${p.project}/${f.name}: provisioning failed: ${f.message}`)),
    ...tests.filter((t) => !t.success).map((t) => `${t.subject}: connection test failed: ${t.message}`),
    ...unhealthy.filter((h) => h.health === 'degraded').map((h) => `${h.subject}: degraded: ${h.reason}`),
    ...unhealthy.filter((h) => h.health === 'progressing').map((h) => `${h.subject}: still ${h.reason} when the wait timed out`),
  ];
  return { provisioning, tests, health, failures, checked: o.wait };
}

/**
 * True when the live resource has run with its current settings and is not degraded: its state is
 * neither its kind's initial one nor a degraded one, and it has not changed since it last ran (a
 * connector that once synced, then pointed at a dead host, passed every later apply untested).
 */
function provenToWork(c: PlannedChange): boolean {
  const d = c.doc!.descriptor;
  const state = d.health ? c.live?.object[d.health.field] : undefined;
  return state !== undefined && state !== d.initialState && c.health?.health !== 'degraded' && !c.health?.changedSinceRun;
}

/**
 * Final health of the declared resources. Only what this apply wrote, what was not healthy when
 * observed, and (after a provisioning) the provisioned kinds are listed again; the rest keep
 * the health observed for the plan, so an apply with nothing to do costs no extra list call.
 */
async function healthAfter(
  client: DataPlatformClient,
  changes: PlannedChange[],
  provisioned: boolean,
  o: HealthWaitOptions,
): Promise<HealthEntry[]> {
  const stale = (c: PlannedChange) =>
    c.action !== 'no-op' || (c.health !== undefined && c.health.health !== 'healthy') || (provisioned && !!c.doc?.descriptor.provisioning);
  const watched = changes.filter((c) => c.doc?.descriptor.health && stale(c));
  const fresh = new Map((watched.length ? await waitForHealth(client, watched, o) : []).map((e, i) => [watched[i], e]));
  return changes.filter((c) => c.doc?.descriptor.health).map((c) => fresh.get(c) ?? healthEntry(c, c.health ?? { health: 'healthy' }));
}

/**
 * Tests the connection of every resource of a kind with x-test-action that this apply created,
 * updated or replaced, and of every declared one that nothing has shown to work yet: still in its
 * initial state (never run) or degraded. Without the second part, an apply whose test failed
 * passed when run again unchanged, with the connection as broken as before.
 */
async function testConnections(
  client: DataPlatformClient,
  plan: Plan,
  result: ApplyResult,
  projectIds: Map<string, string>,
  o: SettleOptions,
): Promise<ConnectionTestOutcome[]> {
  const written = result.outcomes
    .filter((x) => x.status === 'done' && x.change.action !== 'delete' && x.change.doc?.descriptor.testAction)
    .map((x) => ({ change: x.change, id: (x.id ?? x.change.id)! }));
  const unproven = plan.changes
    .filter((c) => c.action === 'no-op' && c.id && c.doc?.descriptor.testAction && !provenToWork(c) && (o.testUnproven?.(c) ?? true))
    .map((c) => ({ change: c, id: c.id! }));
  return mapLimit([...written, ...unproven], o.concurrency, async ({ change: c, id }) => {
    const projectId = c.project !== undefined ? projectIds.get(c.project) : undefined;
    const answer = await testConnectionOf(client, c.doc!.descriptor, { projectId }, id, { signal: o.signal });
    o.onProgress?.(
      `  ${answer.success ? '' : 'x '}${subjectOfChange(c)}: connection test ${answer.success ? 'passed' : 'failed'}: ${answer.message}`,
    );
    return { key: c.key, subject: subjectOfChange(c), success: answer.success, message: answer.message };
  });
}
