import { META, STALE_MS, type Runtime } from './runtime.js';
import { inProject, secondsBetween, skipPending, updateResource, type RunData, type Unit } from './runs.js';
import { failResources } from './infrastructure.js';
import { slicer } from './slices.js';
import { RUN_INTERRUPTED } from '../../kinds/index.js';

interface Claim {
  runId: string;
  instance: string;
  tenant_id: string;
  project_id: string;
}

/**
 * Runs survive as records, but their execution lives in one process. Every run being executed is
 * claimed in `meta` by the instance executing it, and every live instance keeps a heartbeat there.
 * A claim whose instance is gone (stopped, crashed, or silent for STALE_MS) is an interrupted run:
 * it is marked failed, "interrupted by service restart", and its resource is put right. The runtime
 * is given this at start (Runtime.start) and runs it then and on every heartbeat.
 */
export async function recoverAbandonedRuns(rt: Runtime, everyOtherInstanceIsDead: boolean): Promise<void> {
  // A range of the primary key (SQLite's LIKE cannot use it): heartbeats and claims only.
  const rows = await rt.ctx.db.all<{ key: string; value: string }>(
    "SELECT key, value FROM meta WHERE key >= 'runtime.' AND key < 'runtime/'",
  );
  const heartbeats = new Map<string, number>();
  const claims: Claim[] = [];
  for (const row of rows) {
    if (row.key.startsWith(META.instancePrefix)) heartbeats.set(row.key.slice(META.instancePrefix.length), Number(row.value));
    else if (row.key.startsWith(META.runPrefix)) {
      try {
        claims.push({ runId: row.key.slice(META.runPrefix.length), ...(JSON.parse(row.value) as Omit<Claim, 'runId'>) });
      } catch {
        // A claim we cannot read cannot be recovered; leave it.
      }
    }
  }
  const now = rt.nowMs();
  const alive = (instance: string) =>
    instance === rt.instanceId || (!everyOtherInstanceIsDead && heartbeats.has(instance) && now - heartbeats.get(instance)! < STALE_MS);
  const slice = slicer();
  for (const claim of claims) {
    if (rt.stopped) return;
    if (alive(claim.instance)) continue;
    await interrupt(rt, claim);
    // A crashed replica may leave thousands: each is a transaction, and on SQLite they would run back to back.
    await slice();
  }
  for (const instance of heartbeats.keys()) {
    if (!alive(instance)) await rt.ctx.db.run('DELETE FROM meta WHERE key = ?', [META.instance(instance)]);
  }
}

async function interrupt(rt: Runtime, claim: Claim): Promise<void> {
  const { tenant_id: tenantId, project_id: projectId, runId } = claim;
  try {
    await inProject(rt, tenantId, projectId, async (q) => {
      // Another replica may have recovered it meanwhile: the claim is the token.
      if (!(await q.get('SELECT 1 AS ok FROM meta WHERE key = ?', [META.run(runId)]))) return;
      await q.run('DELETE FROM meta WHERE key = ?', [META.run(runId)]);
      const run = await rt.ctx.resources.get(tenantId, projectId, 'run', runId, q);
      if (!run) return;
      const data = run.data as RunData;
      if (data.status !== 'running' && data.status !== 'queued') return;
      const now = rt.now();
      data.status = 'failed';
      data.error = RUN_INTERRUPTED;
      data.finished_at = now;
      data.duration_seconds = secondsBetween(data.started_at, now);
      for (const list of [data.tables, data.steps, data.models, data.changes] as Unit[][]) {
        for (const u of list ?? []) {
          if (u.status !== 'running') continue;
          u.status = 'failed';
          u.error = RUN_INTERRUPTED;
          u.finished_at = now;
          u.duration_seconds = u.started_at ? secondsBetween(u.started_at, now) : null;
        }
        skipPending(list ?? []);
      }
      await rt.ctx.resources.update(run, q);
      switch (data.run_type) {
        case 'connector_sync':
          await updateResource(rt, q, tenantId, projectId, 'connector', run.parentId, (d) => {
            if (d.status === 'syncing') Object.assign(d, { status: 'error', last_error: RUN_INTERRUPTED });
            d.last_sync_at = now;
            d.last_sync_started_at = data.started_at;
          });
          break;
        case 'pipeline':
        case 'dbt_run':
          await updateResource(rt, q, tenantId, projectId, data.run_type === 'pipeline' ? 'pipeline' : 'dbt_project', run.parentId, (d) => {
            if (d.last_run_status === 'running') Object.assign(d, { last_run_status: 'failed', last_error: RUN_INTERRUPTED });
          });
          break;
        case 'infrastructure_apply':
          await failResources(rt, q, { stored: run, data });
          break;
      }
      rt.events.emit('run_update', tenantId, data);
      rt.log?.info({ runId, instance: claim.instance }, 'run interrupted by a service restart marked failed');
    });
  } catch (err) {
    // The project is gone, and its runs with it.
    if ((err as { code?: string }).code === 'resource_not_found') await rt.ctx.db.run('DELETE FROM meta WHERE key = ?', [META.run(runId)]);
    else throw err;
  }
}
