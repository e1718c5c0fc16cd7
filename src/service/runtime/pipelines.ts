import type { Queryable } from '../store/db.js';
import { ApiError, conflict, notFound } from '../errors.js';
import { Stopped, type Runtime } from './runtime.js';
import { guarded, inProject, insertRun, pendingUnit, RunRecorder, runningRunOf, updateResource, type RunData, type StepResult, type Trigger, type UnitStatus } from './runs.js';
import { startConnectorSync, type Started } from './connectors.js';
import { startDbtRun } from './dbt.js';
import { deliver } from './notifications.js';

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
  const { stored, declared } = await inProject(rt, o.tenantId, o.projectId, async (q) => {
    await o.inTx?.(q);
    const pipeline = await rt.ctx.resources.get(o.tenantId, o.projectId, 'pipeline', o.pipelineId, q);
    if (!pipeline) throw notFound('Pipeline');
    if (pipeline.data.enabled === false) throw conflict(`Pipeline "${pipeline.name}" is disabled; enable it (PATCH {"enabled": true}) to run it`);
    const running = await runningRunOf(rt, q, o.tenantId, o.projectId, pipeline.id);
    if (running) throw conflict(`Pipeline "${pipeline.name}" is already running (run ${running.id}); wait for that run to end`);
    const declared = (pipeline.data.steps as DeclaredStep[]) ?? [];
    const steps: StepResult[] = declared.map((s, i) => ({ step_id: `step_${i + 1}`, step_name: s.name, step_type: s.type, run_id: null, ...pendingUnit() }));
    const stored = await insertRun(rt, q, { tenantId: o.tenantId, projectId: o.projectId, parentId: pipeline.id, runType: 'pipeline', trigger: o.trigger, simulated: false, steps });
    pipeline.data.last_run_status = 'running';
    await rt.ctx.resources.update(pipeline, q);
    return { stored, declared };
  });
  const done = rt.execute(stored.id, (signal) => {
    const rec = new RunRecorder(rt, stored, signal);
    return guarded(rec, () => runPipeline(rt, rec, declared), (q) => settlePipeline(rt, q, rec));
  });
  return { run: structuredClone(stored.data as RunData), done };
}

/** The spec's pipeline stream message (section 6), for the stream worker. */
function stepUpdate(rt: Runtime, rec: RunRecorder, step: StepResult) {
  rt.events.emit('step_update', rec.stored.tenantId, {
    pipeline_id: rec.stored.parentId,
    run_id: rec.id,
    message: { type: 'step_update', step_id: step.step_id, step_name: step.step_name, status: step.status, duration_seconds: step.duration_seconds, timestamp: rt.now() },
  });
}

/**
 * Runs the steps as a DAG: a step starts as soon as every step it depends on has completed, so
 * independent steps run concurrently; a step whose dependency failed or was skipped is skipped.
 */
async function runPipeline(rt: Runtime, rec: RunRecorder, declared: DeclaredStep[]): Promise<RunData> {
  const results = rec.data.steps;
  const index = new Map(declared.map((s, i) => [s.name, i]));
  const outcomes = new Map<string, Promise<UnitStatus>>();

  const execute = async (step: DeclaredStep, result: StepResult): Promise<string | null> => {
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
    return child.status === 'succeeded' ? null : `${step.type === 'connector_sync' ? 'connector sync' : 'dbt run'} ${child.id} failed: ${child.error}`;
  };

  const run = (i: number): Promise<UnitStatus> => {
    const step = declared[i];
    let outcome = outcomes.get(step.name);
    if (outcome) return outcome;
    outcome = (async (): Promise<UnitStatus> => {
      const deps = step.depends_on ?? [];
      const depStatus = await Promise.all(deps.map((d) => run(index.get(d)!)));
      const result = results[i];
      const blocked = deps.findIndex((_, k) => depStatus[k] !== 'completed');
      if (blocked >= 0) {
        rec.check();
        result.status = 'skipped';
        result.error = `step ${deps[blocked]} ${depStatus[blocked]}`;
        await rec.save();
        stepUpdate(rt, rec, result);
        return 'skipped';
      }
      await rec.begin(result);
      stepUpdate(rt, rec, result);
      const error = await execute(step, result);
      await rec.end(result, error ? 'failed' : 'completed', error);
      stepUpdate(rt, rec, result);
      return result.status;
    })();
    outcomes.set(step.name, outcome);
    return outcome;
  };

  await Promise.all(declared.map((_, i) => run(i)));
  const failed = results.filter((s) => s.status === 'failed');
  const error = failed.length ? failed.map((s) => `step ${s.step_name} failed: ${s.error}`).join('; ') : null;
  return rec.finish(error ? 'failed' : 'succeeded', error, (q) => settlePipeline(rt, q, rec));
}

async function settlePipeline(rt: Runtime, q: Queryable, rec: RunRecorder): Promise<void> {
  await updateResource(rt, q, rec.stored.tenantId, rec.stored.projectId, 'pipeline', rec.stored.parentId, (d) => {
    d.last_run_status = rec.data.status;
  });
}
