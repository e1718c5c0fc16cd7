import type { Queryable } from '../store/db.js';
import { conflict, notFound } from '../errors.js';
import { topologicalOrder } from '../../kinds/dag.js';
import type { Runtime } from './runtime.js';
import {
  guarded,
  inProject,
  insertRun,
  pendingUnit,
  RunRecorder,
  runningRunOf,
  updateResource,
  type ModelResult,
  type RunData,
  type Trigger,
} from './runs.js';
import type { Started } from './connectors.js';
import { hash32 } from './sources.js';
import { yieldToLoop } from './slices.js';

interface DeclaredModel {
  name: string;
  materialization?: string;
  depends_on?: string[];
  sources?: { connector_id: string; table: string }[];
}

/** Nominal build seconds of a simulated model (time scale 1): by materialization, plus up to 0.9 s from a hash of its name. */
const BASE_SECONDS: Record<string, number> = { view: 1, table: 2, incremental: 1.5, ephemeral: 0 };
export function modelSeconds(m: DeclaredModel): number {
  const base = BASE_SECONDS[m.materialization ?? 'view'] ?? 1;
  return base === 0 ? 0 : base + (hash32(`model:${m.name}`) % 10) / 10;
}

export interface StartDbt {
  tenantId: string;
  projectId: string;
  dbtProjectId: string;
  trigger: Trigger;
  parentRunId?: string | null;
  inTx?: (q: Queryable) => Promise<void>;
}

/** Starts a dbt run: the declared models, to be built in topological order. A dbt project already running is 409. */
export async function startDbtRun(rt: Runtime, o: StartDbt): Promise<Started> {
  const slot = rt.runSlots.take(o.tenantId, o.parentRunId);
  const { stored, declared } = await inProject(rt, o.tenantId, o.projectId, async (q) => {
    await o.inTx?.(q);
    const dbt = await rt.ctx.resources.get(o.tenantId, o.projectId, 'dbt_project', o.dbtProjectId, q);
    if (!dbt) throw notFound('dbt project');
    const running = await runningRunOf(rt, q, o.tenantId, o.projectId, dbt.id);
    if (running) throw conflict(`dbt project "${dbt.name}" is already running (run ${running.id}); wait for that run to end`);
    const declared = (dbt.data.models as DeclaredModel[] | undefined) ?? [];
    const byName = new Map(declared.map((m) => [m.name, m]));
    const order = topologicalOrder(declared.map((m) => ({ name: m.name, dependsOn: m.depends_on ?? [] })));
    const models: ModelResult[] = order.map((name) => ({
      name,
      materialization: byName.get(name)?.materialization ?? 'view',
      ...pendingUnit(),
    }));
    const stored = await insertRun(rt, q, {
      tenantId: o.tenantId,
      projectId: o.projectId,
      parentId: dbt.id,
      runType: 'dbt_run',
      trigger: o.trigger,
      parentRunId: o.parentRunId,
      simulated: true,
      models,
    });
    dbt.data.last_run_status = 'running';
    await rt.ctx.resources.updateComputed(dbt, q);
    return { stored, declared };
  }).catch(slot.failedToStart);
  const done = rt.execute(stored.id, slot, (signal) => {
    // Coalesced: a run of 1,000 models would otherwise write the whole run 2,000 times (quadratic).
    const rec = new RunRecorder(rt, stored, signal, { progress: 'coalesced' });
    return guarded(
      rec,
      () => runDbt(rt, rec, declared),
      (q) => settleDbt(rt, q, rec),
    );
  });
  return { run: structuredClone(stored.data as RunData), done };
}

/** What a model's build needs of a connector it reads: its name and whether its last sync failed (null: it no longer exists). */
type ConnectorState = { name: string; status: unknown } | null;

/**
 * The connectors a run's models read, each read from the store at most once per batch: the
 * models that start at the same moment of the run's simulated clock (ephemeral, failed and
 * skipped models take none of it). A model reads its sources at build time, so the batch ends,
 * and what was read is forgotten, whenever the run waits for a model's build time: a connector
 * that is deleted or whose sync fails during a run still fails the models built after that.
 *
 * Before, every source of every model read its connector again, even 100 sources on one
 * connector: 190 ephemeral models of 100 sources each on one 0.8 MB connector read it 19,000
 * times (27 s, event-loop stalls of 200-300 ms, every other tenant waiting). Now 1 read.
 */
class ConnectorReads {
  private known = new Map<string, ConnectorState>();

  constructor(
    private readonly rt: Runtime,
    private readonly tenantId: string,
    private readonly projectId: string,
  ) {}

  /** The state of every connector `m` reads, those not read in this batch in one statement. */
  async of(m: DeclaredModel): Promise<Map<string, ConnectorState>> {
    const missing = [...new Set((m.sources ?? []).map((s) => s.connector_id))].filter((id) => !this.known.has(id));
    if (missing.length) {
      const found = await this.rt.ctx.resources.getMany(this.tenantId, this.projectId, 'connector', missing);
      for (const id of missing) {
        const c = found.get(id);
        // Only what brokenSource looks at is kept: not a connector's 10,000 selected tables for the whole batch.
        this.known.set(id, c ? { name: c.name, status: c.data.status } : null);
      }
    }
    return this.known;
  }

  /** Simulated time passes: what was read may have changed by the next model. */
  endBatch(): void {
    this.known.clear();
  }
}

/**
 * Why a model cannot build: the first of its sources (in declaration order) whose connector is
 * gone or whose last sync failed. (A model reads its sources at build time, so it is checked then.)
 */
function brokenSource(m: DeclaredModel, connectors: Map<string, ConnectorState>): string | null {
  for (const source of m.sources ?? []) {
    const connector = connectors.get(source.connector_id);
    if (!connector) return `source ${source.table}: connector ${source.connector_id} no longer exists`;
    if (connector.status === 'error') return `source ${source.table}: connector "${connector.name}" is in error (its last sync failed)`;
  }
  return null;
}

/**
 * Builds the models one at a time in topological order (simulated: each takes modelSeconds).
 * Each model starts on a new turn of the event loop: on SQLite every query resolves at once, and
 * failed, skipped and ephemeral models wait for no build time, so 1,000 of them would otherwise
 * hold the loop for the whole run.
 */
async function runDbt(rt: Runtime, rec: RunRecorder, declared: DeclaredModel[]): Promise<RunData> {
  const byName = new Map(declared.map((m) => [m.name, m]));
  const status = new Map<string, string>();
  const connectors = new ConnectorReads(rt, rec.stored.tenantId, rec.stored.projectId);
  for (const result of rec.data.models) {
    await yieldToLoop();
    const m = byName.get(result.name)!;
    const blocked = (m.depends_on ?? []).find((d) => status.get(d) !== 'completed');
    if (blocked) {
      rec.check();
      result.status = 'skipped';
      result.error = `upstream model ${blocked} ${status.get(blocked) ?? 'did not complete'}`;
      status.set(result.name, 'skipped');
      await rec.save();
      continue;
    }
    await rec.begin(result);
    const broken = brokenSource(m, await connectors.of(m));
    if (broken) {
      await rec.end(result, 'failed', broken, 0);
    } else {
      const seconds = modelSeconds(m);
      if (seconds > 0) connectors.endBatch();
      await rt.simulate(seconds, rec.signal);
      await rec.end(result, 'completed', null, seconds);
    }
    status.set(result.name, result.status);
  }
  const failed = rec.data.models.filter((m) => m.status === 'failed');
  const error = failed.length
    ? `${failed.length} of ${rec.data.models.length} models failed: ${failed.map((m) => `${m.name}: ${m.error}`).join('; ')}`
    : null;
  return rec.finish(error ? 'failed' : 'succeeded', error, (q) => settleDbt(rt, q, rec));
}

async function settleDbt(rt: Runtime, q: Queryable, rec: RunRecorder): Promise<void> {
  await updateResource(rt, q, rec.stored.tenantId, rec.stored.projectId, 'dbt_project', rec.stored.parentId, (d) => {
    d.last_run_status = rec.data.status;
    d.last_error = rec.data.status === 'failed' ? rec.data.error : null;
  });
}
