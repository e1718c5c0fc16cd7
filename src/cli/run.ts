import { Command, Option } from 'commander';
import type { DataPlatformClient, EventStream, Run, RunOwner, StepUpdate } from '../client/index.js';
import { parseDuration } from '../controller/duration.js';
import { makeClient, withConnection, type ConnectionOpts } from '../client/options.js';
import { guarded } from './plan.js';
import { watchParent } from '../parent-watch.js';

/**
 * `dpctl run sync|pipeline|dbt NAME --project P`: triggers a run (spec section 4) and, with
 * --follow, waits for its end so that a CI step fails when the run fails. Pipelines report their
 * steps over the WebSocket stream (section 6); syncs and dbt runs have no stream and are polled.
 */

type RunKind = 'sync' | 'pipeline' | 'dbt';
type Output = 'text' | 'json';

interface RunOpts extends ConnectionOpts {
  project: string;
  follow: boolean;
  timeout: string;
  output: Output;
}

/** What each subcommand runs: the kind its NAME names, and how errors and help call it. */
const KINDS: Record<RunKind, { kind: 'connector' | 'pipeline' | 'dbt_project'; label: string; describe: string }> = {
  sync: { kind: 'connector', label: 'connector', describe: 'Sync a connector (POST .../connectors/{id}/sync)' },
  pipeline: { kind: 'pipeline', label: 'pipeline', describe: 'Run a pipeline (POST .../pipelines/{id}/run); --follow streams its steps' },
  dbt: { kind: 'dbt_project', label: 'dbt project', describe: 'Run a dbt project (POST .../dbt-projects/{id}/run)' },
};

const TERMINAL = new Set<Run['status']>(['succeeded', 'failed', 'cancelled']);
/** Polling of runs without a stream: quick at first (short runs), then every few seconds (long ones). */
const POLL_FIRST_MS = 300;
const POLL_MAX_MS = 5_000;
/** How often a followed pipeline's run is also read, in case its stream never says the run is over. */
const WATCH_MS = 2_000;

/** The run, its owner and names, as resolved from the names on the command line. */
interface Target {
  kind: RunKind;
  name: string;
  projectId: string;
  resourceId: string;
  owner: RunOwner;
}

export function runCommand(): Command {
  const run = new Command('run').description('Trigger a connector sync, a pipeline run or a dbt run, and optionally wait for its outcome');
  for (const kind of Object.keys(KINDS) as RunKind[]) run.addCommand(runSubcommand(kind));
  return run;
}

function runSubcommand(kind: RunKind): Command {
  const { label, describe } = KINDS[kind];
  return withConnection(new Command(kind).description(describe).argument('<name>', `the ${label}'s name`))
    .requiredOption('--project <name>', `the project the ${label} is in (its name)`)
    .option('--follow', 'wait for the run to end; exit 0 when it succeeded, 1 when it failed', false)
    .option('--timeout <duration>', 'with --follow: how long to wait (500ms, 30s, 5m, 1h); exit 1 when exceeded', '1h')
    .addOption(new Option('-o, --output <format>', 'output format (json: the run object)').choices(['text', 'json']).default('text'))
    .action((name: string, opts: RunOpts) => guarded(() => runAction(kind, name, opts)));
}

async function runAction(kind: RunKind, name: string, opts: RunOpts): Promise<number> {
  // Checked before anything is triggered: a typo must not start a run it then cannot follow.
  const timeoutMs = parseDuration(opts.timeout, '--timeout');
  const client = await makeClient(opts);
  try {
    const target = await resolveTarget(client, kind, name, opts.project);
    const { run_id: runId } = await trigger(client, target);
    const reader = runReader(client, target, runId);
    if (!opts.follow) {
      const run = await reader();
      print(opts.output === 'json' ? json(run) : `${title(target)}: run ${run.id} ${run.status} (started ${run.started_at})\n`);
      return 0;
    }
    if (opts.output === 'text') print(`${title(target)}: run ${runId} started\n`);
    // Under npx or an npm script, a SIGTERM to npm alone would leave this waiting, re-parented, up to --timeout.
    const unwatch = watchParent(() => {
      process.stderr.write(`dpctl: the parent process (npm) exited: no longer following run ${runId} (it goes on in the service)\n`);
      process.exit(1);
    });
    try {
      const progress = progressPrinter(opts.output === 'json' ? (s) => process.stderr.write(s) : print);
      const run = await withTimeout(timeoutMs, runId, (signal) =>
        kind === 'pipeline' ? followPipeline(client, target, runId, reader, progress, signal) : pollRun(reader, progress.run, signal),
      );
      return report(target, run, opts.output);
    } finally {
      unwatch();
    }
  } finally {
    await client.close();
  }
}

/** The project by name, then the connector, pipeline or dbt project by name in it. */
async function resolveTarget(client: DataPlatformClient, kind: RunKind, name: string, projectName: string): Promise<Target> {
  const project = await client.projects.findByName(projectName);
  if (!project) throw new Error(`project "${projectName}" not found`);
  const { kind: resourceKind, label } = KINDS[kind];
  const resource = await client.resourcesOf(resourceKind, { projectId: project.id }).findByName(name);
  if (!resource) throw new Error(`${label} "${name}" not found in project "${projectName}"`);
  const id = resource.id;
  const owner: RunOwner = kind === 'sync' ? { connectorId: id } : kind === 'pipeline' ? { pipelineId: id } : { dbtProjectId: id };
  return { kind, name, projectId: project.id, resourceId: id, owner };
}

function trigger(client: DataPlatformClient, t: Target) {
  if (t.kind === 'sync') return client.syncConnector(t.projectId, t.resourceId);
  if (t.kind === 'pipeline') return client.runPipeline(t.projectId, t.resourceId);
  return client.runDbtProject(t.projectId, t.resourceId);
}

const title = (t: Target) => `${KINDS[t.kind].label} "${t.name}"`;
const print = (s: string) => void process.stdout.write(s);
const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

/**
 * Reads the run. Pipelines have a GET for one run in the spec. Syncs and dbt runs only have the
 * history list (newest last), so the service's extension GET .../runs/{runId} is tried first
 * (one request per poll); a service without it (404, e.g. --strict-spec) is read from the list.
 */
function runReader(client: DataPlatformClient, t: Target, runId: string): (signal?: AbortSignal) => Promise<Run> {
  if (t.kind === 'pipeline') return (signal) => client.pipelineRun(t.projectId, t.resourceId, runId, { signal });
  const route =
    t.kind === 'sync' ? '/projects/{id}/connectors/{ownerId}/runs/{runId}' : '/projects/{id}/dbt-projects/{ownerId}/runs/{runId}';
  const fromList = runFromList(client, t, runId);
  let useList = false;
  return async (signal) => {
    if (!useList) {
      try {
        return (await client.request<Run>({ method: 'GET', route, params: { id: t.projectId, ownerId: t.resourceId, runId }, signal }))
          .body;
      } catch (err) {
        const { ApiError } = await import('../client/index.js');
        if (!(err instanceof ApiError && err.status === 404)) throw err;
        useList = true;
      }
    }
    return fromList(signal);
  };
}

/**
 * The run from its owner's history. The list is oldest first, so the first read pages to the
 * end; the cursor of the page that held the run is kept, and later reads start there.
 */
function runFromList(client: DataPlatformClient, t: Target, runId: string): (signal?: AbortSignal) => Promise<Run> {
  const history = client.runs(t.projectId, t.owner);
  let start: string | undefined;
  const search = async (from: string | undefined, signal?: AbortSignal): Promise<Run | undefined> => {
    for (let cursor = from; ;) {
      const page = await history.list(undefined, { cursor, signal });
      const run = page.data.find((r) => r.id === runId);
      if (run) {
        start = cursor;
        return run;
      }
      if (!page.has_more || !page.next_cursor) return undefined;
      cursor = page.next_cursor;
    }
  };
  return async (signal) => {
    // From the start again when the remembered page no longer holds it (a cursor is opaque; it may not last).
    const run = (await search(start, signal)) ?? (start === undefined ? undefined : await search(undefined, signal));
    if (!run) throw new Error(`run ${runId} is not in the run history of ${title(t)}`);
    return run;
  };
}

/** Runs `fn` under a deadline; exceeding it aborts the wait (not the run) and is an error naming the run. */
async function withTimeout(ms: number, runId: string, fn: (signal: AbortSignal) => Promise<Run>): Promise<Run> {
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), ms);
  try {
    return await fn(deadline.signal);
  } catch (err) {
    if (deadline.signal.aborted)
      throw new Error(`timed out after ${formatMs(ms)} waiting for run ${runId} to end (it goes on in the service)`, {
        cause: err,
      });
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

const formatMs = (ms: number) =>
  ms % 3_600_000 === 0 ? `${ms / 3_600_000}h` : ms % 60_000 === 0 ? `${ms / 60_000}m` : ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;

/** Resolves after `ms`, or at once when the signal aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** Reads the run until it has ended, backing off; each read goes to `onRead` (progress lines). */
async function pollRun(read: (signal: AbortSignal) => Promise<Run>, onRead: (run: Run) => void, signal: AbortSignal): Promise<Run> {
  for (let wait = POLL_FIRST_MS; ; wait = Math.min(POLL_MAX_MS, Math.round(wait * 1.5))) {
    const run = await read(signal);
    onRead(run);
    if (TERMINAL.has(run.status)) return run;
    await sleep(wait, signal);
    signal.throwIfAborted();
  }
}

/**
 * A pipeline run: its step updates from the stream, then the run itself, read, for the outcome.
 * The stream replays what already happened, so a run that ended before it opened still shows its
 * steps; and whatever ends the stream (the run's end, a lost connection, a refusal) the exit code
 * comes from the run as the service records it.
 */
async function followPipeline(
  client: DataPlatformClient,
  t: Target,
  runId: string,
  read: (signal: AbortSignal) => Promise<Run>,
  progress: Progress,
  signal: AbortSignal,
): Promise<Run> {
  const stream = client.streams.pipelineRun(t.resourceId, runId, { projectId: t.projectId, signal, maxAttempts: 5 });
  const stopWatching = closeWhenEnded(stream, read, signal);
  try {
    for await (const update of stream) progress.step(update);
  } catch (err) {
    signal.throwIfAborted();
    progress.note(`the step stream ended (${(err as Error).message}); reading the run instead`);
  } finally {
    stopWatching();
  }
  const run = await pollRun(read, () => undefined, signal);
  // Steps whose final state the stream did not deliver (it closed early): as the run records them.
  for (const s of run.steps) {
    if (s.status === 'completed' || s.status === 'failed' || s.status === 'skipped') {
      progress.step(
        {
          type: 'step_update',
          step_id: s.step_id,
          step_name: s.step_name,
          status: s.status,
          duration_seconds: s.duration_seconds ?? 0,
          timestamp: s.finished_at ?? '',
        },
        s.error,
      );
    }
  }
  return run;
}

/**
 * Reads the run now and then while its stream is open, and closes the stream shortly after the
 * run has ended: the stream ends by itself once it has delivered every step's final state, but a
 * run whose messages never all come (no steps, a message lost) would otherwise hold it open.
 */
function closeWhenEnded(stream: EventStream<StepUpdate>, read: (signal: AbortSignal) => Promise<Run>, signal: AbortSignal): () => void {
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  void (async () => {
    while (!stop.signal.aborted) {
      await sleep(WATCH_MS, stop.signal);
      if (stop.signal.aborted) return;
      const run = await read(stop.signal).catch(() => undefined); // the final read reports errors
      if (run && TERMINAL.has(run.status)) {
        // A moment for the last messages in flight, which print better live than from the run.
        await sleep(WATCH_MS / 2, stop.signal);
        return stream.close();
      }
    }
  })();
  return () => {
    signal.removeEventListener('abort', onAbort);
    stop.abort();
  };
}

interface Progress {
  step(update: StepUpdate, error?: string | null): void;
  run(run: Run): void;
  note(text: string): void;
}

/**
 * Progress lines, each (unit, status) once: pipeline steps (stream or run), sync tables and dbt
 * models (from each poll of the run). `write` is stdout for text output, stderr with --output json.
 */
function progressPrinter(write: (s: string) => void): Progress {
  const seen = new Set<string>();
  const line = (what: string, name: string, status: string, seconds: number | null | undefined, detail?: string | null) => {
    const key = `${what}\u0000${name}\u0000${status}`;
    if (seen.has(key)) return;
    seen.add(key);
    const took = status !== 'running' && status !== 'skipped' && typeof seconds === 'number' ? ` in ${seconds} s` : '';
    write(`  ${what} ${name}: ${status}${took}${detail ? ` (${detail})` : ''}\n`);
  };
  return {
    step: (u, error) =>
      line('step', u.step_name, u.status, u.duration_seconds, u.status === 'failed' || u.status === 'skipped' ? error : undefined),
    run(run) {
      for (const t of run.tables)
        if (t.status !== 'pending')
          line('table', t.table, t.status, t.duration_seconds, t.status === 'completed' && t.rows !== null ? `${t.rows} rows` : t.error);
      for (const m of run.models) if (m.status !== 'pending') line('model', m.name, m.status, m.duration_seconds, m.error);
    },
    note: (text) => void process.stderr.write(`dpctl: ${text}\n`),
  };
}

/** The outcome: a summary (or the run as JSON), the error on stderr; 0 only for a succeeded run. */
function report(t: Target, run: Run, output: Output): number {
  const seconds = run.duration_seconds ?? null;
  if (output === 'json') print(json(run));
  else print(`${title(t)}: run ${run.id} ${run.status}${seconds === null ? '' : ` in ${seconds} s`}\n`);
  if (run.status === 'succeeded') return 0;
  process.stderr.write(`dpctl: run ${run.id} ${run.status}: ${run.error ?? 'no reason given'}\n`);
  return 1;
}
