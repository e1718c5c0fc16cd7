import type { Queryable } from '../store/db.js';
import { ApiError, conflict, notFound } from '../errors.js';
import { Stopped, type Runtime } from './runtime.js';
import {
  guarded,
  inProject,
  insertRun,
  pendingUnit,
  RunRecorder,
  runningRunOf,
  streamedDuration,
  updateResource,
  type RunData,
  type StepResult,
  type Trigger,
} from './runs.js';
import { startConnectorSync, type Started } from './connectors.js';
import { startDbtRun } from './dbt.js';
import { deliver } from './notifications.js';
import { stepBudgetOf } from './tenant-work.js';

interface DeclaredStep {
  name: string;
  type: 'connector_sync' | 'dbt_run' | 'notification';
  connector_id?: string;
  dbt_project_id?: string;
  channel_id?: string;
  depends_on?: string[];
}

export interface StartPipeline {
  tenantId: string;
  projectId: string;
  pipelineId: string;
  trigger: Trigger;
  inTx?: (q: Queryable) => Promise<void>;
}

/** Starts a pipeline run. A disabled pipeline, or one already running, is 409. */
export async function startPipelineRun(rt: Runtime, o: StartPipeline): Promise<Started> {
  const slot = rt.runSlots.take(o.tenantId);
  const { stored, declared } = await inProject(rt, o.tenantId, o.projectId, async (q) => {
    await o.inTx?.(q);
    const pipeline = await rt.ctx.resources.get(o.tenantId, o.projectId, 'pipeline', o.pipelineId, q);
    if (!pipeline) throw notFound('Pipeline');
    if (pipeline.data.enabled === false)
      throw conflict(`Pipeline "${pipeline.name}" is disabled; enable it (PATCH {"enabled": true}) to run it`);
    const running = await runningRunOf(rt, q, o.tenantId, o.projectId, pipeline.id);
    if (running) throw conflict(`Pipeline "${pipeline.name}" is already running (run ${running.id}); wait for that run to end`);
    const declared = (pipeline.data.steps as DeclaredStep[]) ?? [];
    const steps: StepResult[] = declared.map((s, i) => ({
      step_id: `step_${i + 1}`,
      step_name: s.name,
      step_type: s.type,
      run_id: null,
      ...pendingUnit(),
    }));
    const stored = await insertRun(rt, q, {
      tenantId: o.tenantId,
      projectId: o.projectId,
      parentId: pipeline.id,
      runType: 'pipeline',
      trigger: o.trigger,
      simulated: false,
      steps,
    });
    pipeline.data.last_run_status = 'running';
    await rt.ctx.resources.updateComputed(pipeline, q);
    return { stored, declared };
  }).catch(slot.failedToStart);
  const done = rt.execute(stored.id, slot, (signal) => {
    const rec = new RunRecorder(rt, stored, signal, { progress: 'coalesced' });
    return guarded(
      rec,
      () => runPipeline(rt, rec, declared),
      (q) => settlePipeline(rt, q, rec),
    );
  });
  return { run: structuredClone(stored.data as RunData), done };
}

/** The spec's pipeline stream message (section 6), for the stream worker. */
function stepUpdate(rt: Runtime, rec: RunRecorder, step: StepResult) {
  const message = {
    type: 'step_update',
    step_id: step.step_id,
    step_name: step.step_name,
    status: step.status,
    duration_seconds: streamedDuration(step.duration_seconds),
    timestamp: rt.now(),
  };
  // Sent at once, numbered; the write that stores the step's state follows (see RunRecorder.announce).
  rec.announce((seq) =>
    rt.events.emit('step_update', rec.stored.tenantId, { pipeline_id: rec.stored.parentId, run_id: rec.id, seq, message }),
  );
}

/** Steps of one run that execute at the same time, at most (independent steps run concurrently). */
export const STEP_CONCURRENCY = 10;

/** Resolves on the next turn of the event loop, after pending I/O: long runs give way to requests. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Runs one step (a sync, a dbt run or a notification); the error that failed it, or null. */
async function executeStep(rt: Runtime, rec: RunRecorder, step: DeclaredStep, result: StepResult): Promise<string | null> {
  const { tenantId, projectId } = rec.stored;
  if (step.type === 'notification') {
    // Sent through the channel (notifications.ts); a failed delivery (after retries) fails the step.
    const channel = await rt.ctx.resources.get(tenantId, projectId, 'notification_channel', step.channel_id ?? '');
    if (!channel) return `notification channel ${step.channel_id} does not exist`;
    if (channel.data.enabled === false) return `notification channel "${channel.name}" is disabled`;
    rec.check();
    const sent = await deliver(rt, channel, {
      type: 'pipeline_notification',
      project_id: projectId,
      timestamp: rt.now(),
      message: `Pipeline run ${rec.id}: step ${step.name}`,
      pipeline_id: rec.stored.parentId,
      run_id: rec.id,
      step_name: step.name,
      steps: rec.data.steps.map((s) => ({ step_name: s.step_name, status: s.status, error: s.error })),
    });
    return sent.success ? null : `notification to "${channel.name}" failed: ${sent.message}`;
  }
  let started: Started;
  try {
    started =
      step.type === 'connector_sync'
        ? await startConnectorSync(rt, { tenantId, projectId, connectorId: step.connector_id!, trigger: 'pipeline', parentRunId: rec.id })
        : await startDbtRun(rt, { tenantId, projectId, dbtProjectId: step.dbt_project_id!, trigger: 'pipeline', parentRunId: rec.id });
  } catch (err) {
    if (err instanceof ApiError) return err.message;
    throw err;
  }
  result.run_id = started.run.id;
  await rec.save();
  const child = await started.done;
  if (!child) throw new Stopped();
  return child.status === 'succeeded'
    ? null
    : `${step.type === 'connector_sync' ? 'connector sync' : 'dbt run'} ${child.id} failed: ${child.error}`;
}

/**
 * Runs the steps as a DAG: a step starts as soon as every step it depends on has completed, so
 * independent steps run concurrently (up to STEP_CONCURRENCY, and within the tenant's step budget
 * across all its runs, TENANT_STEP_CONCURRENCY); a step whose dependency failed or
 * was skipped is skipped. Linear in steps + dependencies (Kahn's algorithm: each step counts its
 * unfinished dependencies), and every step starts on a turn of the event loop of its own.
 */
async function runPipeline(rt: Runtime, rec: RunRecorder, declared: DeclaredStep[]): Promise<RunData> {
  const results = rec.data.steps;
  const index = new Map(declared.map((s, i) => [s.name, i]));
  const dependents: number[][] = declared.map(() => []);
  const waiting = declared.map((s, i) => {
    for (const d of s.depends_on ?? []) dependents[index.get(d)!].push(i);
    return (s.depends_on ?? []).length;
  });
  const ready = declared.flatMap((_, i) => (waiting[i] === 0 ? [i] : []));

  const budget = stepBudgetOf(rt);
  const runStep = async (i: number): Promise<void> => {
    // A slot of the tenant's step budget (tenant-work.ts), in turn with its other runs' steps.
    const release = await budget.take(rec.stored.tenantId, rec.signal);
    try {
      await executeOne(i);
    } finally {
      release();
    }
  };
  const executeOne = async (i: number): Promise<void> => {
    await nextTurn();
    const step = declared[i];
    const result = results[i];
    const blocked = (step.depends_on ?? []).find((d) => results[index.get(d)!].status !== 'completed');
    if (blocked !== undefined) {
      rec.check();
      result.status = 'skipped';
      result.error = `step ${blocked} ${results[index.get(blocked)!].status}`;
      await rec.save();
      stepUpdate(rt, rec, result);
      return;
    }
    await rec.begin(result);
    stepUpdate(rt, rec, result);
    const error = await executeStep(rt, rec, step, result);
    await rec.end(result, error ? 'failed' : 'completed', error);
    stepUpdate(rt, rec, result);
  };

  await new Promise<void>((resolve, reject) => {
    let next = 0;
    let running = 0;
    let finished = 0;
    const pump = () => {
      if (finished === declared.length) return resolve();
      while (running < STEP_CONCURRENCY && next < ready.length) {
        const i = ready[next++];
        running++;
        runStep(i).then(() => {
          running--;
          finished++;
          for (const j of dependents[i]) if (--waiting[j] === 0) ready.push(j);
          pump();
        }, reject);
      }
    };
    pump();
  });
  const failed = results.filter((s) => s.status === 'failed');
  const error = failed.length ? failed.map((s) => `step ${s.step_name} failed: ${s.error}`).join('; ') : null;
  return rec.finish(error ? 'failed' : 'succeeded', error, (q) => settlePipeline(rt, q, rec));
}

async function settlePipeline(rt: Runtime, q: Queryable, rec: RunRecorder): Promise<void> {
  await updateResource(rt, q, rec.stored.tenantId, rec.stored.projectId, 'pipeline', rec.stored.parentId, (d) => {
    d.last_run_status = rec.data.status;
    d.last_error = rec.data.status === 'failed' ? rec.data.error : null;
  });
}
