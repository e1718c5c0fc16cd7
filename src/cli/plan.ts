import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { Command, Option } from 'commander';
import type { DataPlatformClient } from '../client/index.js';
import { makeClient, parseConcurrency, withConnection, type ConnectionOpts } from '../client/options.js';
import type { EngineOptions, SavedPlan } from '../engine/index.js';
import { parseDuration } from '../controller/duration.js';
import { rootCauses } from '../config/errors.js';
import { stopOnInterrupt } from './interrupt.js';

// The client and the engine load when a command runs, so `dpctl --help` and the commands that
// do not need them start without them.
const loadEngine = () => import('../engine/index.js');

export interface CommonOpts extends ConnectionOpts {
  sourceId?: string;
  output: 'text' | 'json' | 'markdown';
  concurrency: string;
  allowUndeclaredProjects: boolean;
  /** --adopt: plan and apply only. */
  adopt?: boolean;
  specOperations: boolean;
  prune?: boolean;
  allowMassDelete?: boolean;
  /** false with --no-cache. */
  cache?: boolean;
  /** --target, repeatable (plan and apply). */
  target?: string[];
}

/** `outputs`: the --output choices of the command (markdown only where a report fits a PR comment). */
export function withCommon(cmd: Command, outputs: CommonOpts['output'][] = ['text', 'json']): Command {
  return withConnection(cmd.argument('<path>', 'YAML file or directory (read recursively)'))
    .option('--source-id <id>', 'ownership label value (default: the config directory name)')
    .addOption(new Option('-o, --output <format>', 'output format').choices(outputs).default('text'))
    .option('--concurrency <n>', 'parallel API calls', '4')
    .option(
      '--allow-undeclared-projects',
      'metadata.project may name a project that exists on the server without a Project document',
      false,
    )
    .option('--spec-operations', 'plan with only the operations the spec documents (a service run with --strict-spec)', false)
    .option('--no-cache', 'do not use the parse/validation cache (DPCTL_CACHE_DIR, else $XDG_CACHE_HOME/dpctl or ~/.cache/dpctl)');
}

/** A client whose login and project list are under way: see connect(). */
interface Connection {
  client: DataPlatformClient;
  /** The live projects (for EngineOptions.projects). */
  projects: Promise<Record<string, unknown>[]>;
  /** Stops what is still running (a login retrying against an unreachable service) and closes the client. */
  close(): Promise<void>;
}

/**
 * The client, with its login and the project list started at once, before the engine loads and
 * the config is parsed: the requests go out while the engine's modules load (the parse itself is
 * synchronous), and the answers wait until the plan observes. With a config error they are
 * abandoned (close() aborts them); a failed login is reported when the plan awaits it, as before.
 */
async function connect(opts: CommonOpts): Promise<Connection> {
  // undici's HTTP parser is WebAssembly (llhttp). V8 compiles it with its baseline compiler, then
  // again in the background with its optimising one, and a process that has finished waits for
  // that second compile before it exits: ~65 ms and ~30 MB of peak memory that a command this
  // short never gets back. Set before the client loads; this process only (the dpctl command).
  setFlagsFromString('--liftoff-only');
  const client = await makeClient(opts);
  const { SCOPE_CONTAINER } = await import('../kinds/index.js'); // loaded with the client already
  const abort = new AbortController();
  // The login is explicit so that the abort stops it too (retries included), not only the wait for it.
  const projects = client
    .login({ signal: abort.signal })
    .then(() => client.resourcesOf(SCOPE_CONTAINER.kind).listAll({ signal: abort.signal }));
  projects.catch(() => undefined); // awaited by the plan, or abandoned
  return {
    client,
    projects,
    async close() {
      abort.abort();
      await client.close();
    },
  };
}

export async function engineOptions(path: string, opts: CommonOpts, projects?: Promise<Record<string, unknown>[]>): Promise<EngineOptions> {
  const [{ defaultSourceId, parseTarget }, { ConfigParseCache, PersistentParseCache }] = await Promise.all([
    loadEngine(),
    import('../config/index.js'),
  ]);
  const concurrency = parseConcurrency(opts.concurrency);
  return {
    // Valid files parsed and validated by an earlier run are not parsed again (see docs/guides/reconciler.md).
    ...(opts.cache === false ? {} : { parseCache: new ConfigParseCache({ persistent: new PersistentParseCache(), memory: false }) }),
    sourceId: opts.sourceId ?? defaultSourceId(path),
    // Only --prune deletes by it; drift prunes nothing.
    sourceIdDefaulted: opts.sourceId === undefined && !!opts.prune,
    concurrency,
    allowUndeclaredProjects: opts.allowUndeclaredProjects,
    adopt: opts.adopt ?? false,
    specOperations: opts.specOperations,
    prune: opts.prune ?? false,
    allowMassDelete: opts.allowMassDelete ?? false,
    targets: (opts.target ?? []).map(parseTarget),
    ...(projects ? { projects } : {}),
  };
}

/** plan and apply only: drift reports either way, and adopt is the command for it. */
const ADOPT_HELP = 'take ownership of existing resources the config declares that dpctl did not create';

const collect = (value: string, previous: string[] = []) => [...previous, value];
const TARGET_HELP = 'plan only this resource and what it needs: Kind/project/name (Kind/name for tenant-level kinds); repeatable';

/** Runs a command body; configuration and API errors exit 1 with a message. */
export async function guarded(fn: () => Promise<number>): Promise<void> {
  try {
    process.exitCode = await fn();
  } catch (err) {
    if (err instanceof (await loadEngine()).EngineConfigError) {
      const n = err.errors.length;
      const roots = rootCauses(err.errors);
      const causes = roots < n ? ` (${roots} root cause${roots === 1 ? '' : 's'})` : '';
      process.stderr.write(`${err.message}\ninvalid: ${n} error${n === 1 ? '' : 's'}${causes}\n`);
    } else process.stderr.write(`dpctl: ${(err as Error).message}\n`);
    process.exitCode = 1;
  }
}

const print = (s: string) => process.stdout.write(s);

/**
 * With --output markdown, an invalid config is also printed as markdown on stdout (and still on
 * stderr, exit 1): CI posts stdout as the PR comment, and that is the failure a PR's author must
 * see there. Other failures (credentials, network) are the pipeline's, and stay in its log.
 */
async function markdownOnConfigError<T>(command: 'plan' | 'drift', output: CommonOpts['output'], fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    const { EngineConfigError, renderConfigErrorsMarkdown } = await loadEngine();
    if (output === 'markdown' && err instanceof EngineConfigError) print(renderConfigErrorsMarkdown(command, err.errors));
    throw err;
  }
}

/** `dpctl plan <path>`: 0 in sync, 2 changes (the platform's pending provisioning included), 1 error. */
export function planCommand(): Command {
  return withCommon(new Command('plan').description('Show what apply would change (observes with list calls; changes nothing)'), [
    'text',
    'json',
    'markdown',
  ])
    .option('--adopt', ADOPT_HELP, false)
    .option('--prune', 'also plan deleting managed resources that left the config', false)
    .option('--allow-mass-delete', 'allow pruning more than max(5, 20%) of the managed resources', false)
    .option('--target <address>', TARGET_HELP, collect)
    .option(
      '--out <file>',
      'also save the plan to FILE (no secret values, only fingerprints): dpctl apply FILE applies exactly it, or refuses',
    )
    .action((path: string, opts: CommonOpts & { out?: string }) =>
      guarded(async () => {
        const { client, projects, close } = await connect(opts);
        try {
          const engine = await loadEngine();
          const options = await engineOptions(path, opts, projects);
          const { plan, state, secrets } = await markdownOnConfigError('plan', opts.output, async () =>
            engine.preparePlan(client, [path], options),
          );
          const previews = plan.errors.length ? [] : await engine.previewProvisioning(client, plan, state);
          const provisions = engine.provisioningCount(previews);
          if (opts.output === 'json')
            print(
              `${JSON.stringify({ ...engine.planJson(plan), provisioning: engine.provisioningPreviewJson(previews), health: engine.planHealthJson(plan) }, null, 2)}\n`,
            );
          else if (opts.output === 'markdown')
            print(engine.renderPlanMarkdown(plan, { provisions }) + engine.renderSettleMarkdown(previews, plan));
          else
            print(
              engine.renderPlan(plan, {
                colour: !!process.stdout.isTTY,
                sections: engine.renderProvisioningPreview(previews, plan) + engine.renderPlanHealth(plan),
                provisions,
              }),
            );
          if (opts.out && !plan.errors.length) {
            writeFileSync(
              opts.out,
              `${JSON.stringify(engine.savePlan(plan, secrets, savedMeta(path, opts, options), engine.fingerprintKeyOf(process.env)), null, 2)}\n`,
              {
                mode: 0o600,
              },
            );
            process.stderr.write(`saved the plan to ${opts.out}: apply it with dpctl apply ${opts.out}\n`);
          }
          return plan.errors.length ? 1 : engine.hasChanges(plan) || provisions ? 2 : 0;
        } finally {
          await close();
        }
      }),
    );
}

/** What a saved plan records of how it was made, so that apply plans the same way. */
function savedMeta(path: string, opts: CommonOpts, options: EngineOptions) {
  return {
    config_path: resolve(path),
    options: {
      source_id: options.sourceId,
      prune: !!options.prune,
      allow_mass_delete: !!options.allowMassDelete,
      adopt: !!options.adopt,
      spec_operations: !!options.specOperations,
      allow_undeclared_projects: !!options.allowUndeclaredProjects,
      targets: opts.target ?? [],
    },
  };
}

interface ApplyOpts extends CommonOpts {
  wait: boolean;
  waitTimeout: string;
  testConnections: boolean;
  autoApprove: boolean;
}

/** `dpctl apply <path|plan file>`: 0 only when everything converged, was provisioned, passed its tests and is healthy. */
export function applyCommand(): Command {
  return withCommon(
    new Command('apply').description(
      'Plan (or take a plan saved by dpctl plan --out), make the platform match the config, provision and wait until it works',
    ),
  )
    .option('--adopt', ADOPT_HELP, false)
    .option('--prune', 'delete managed resources (label dpctl.dev/managed-by = source id) that left the config', false)
    .option('--allow-mass-delete', 'allow pruning more than max(5, 20%) of the managed resources', false)
    .option('--target <address>', TARGET_HELP, collect)
    .option('--auto-approve', 'do not ask for confirmation on a terminal', false)
    .option('--no-wait', 'start provisioning and return: do not wait for it, nor for health')
    .option('--wait-timeout <duration>', 'how long to wait for provisioning and health (e.g. 90s, 10m, 1h)', '10m')
    .option(
      '--test-connections',
      'test the connection of every created or changed connector, and of unchanged ones never synced or in error; a failed test fails the apply',
      false,
    )
    .action((path: string, opts: ApplyOpts) => guarded(() => runApply(path, opts)));
}

/** A saved plan named on the command line: its configuration and options replace the flags'. */
function fromSavedPlan(file: string, opts: ApplyOpts, saved: SavedPlan): { path: string; opts: ApplyOpts } {
  const o = saved.options;
  process.stderr.write(`applying the plan saved in ${file} (${saved.created_at}) for ${saved.config_path}\n`);
  return {
    path: saved.config_path,
    opts: {
      ...opts,
      sourceId: o.source_id,
      prune: o.prune,
      allowMassDelete: o.allow_mass_delete,
      adopt: o.adopt,
      specOperations: o.spec_operations,
      allowUndeclaredProjects: o.allow_undeclared_projects,
      target: o.targets,
      autoApprove: true,
    },
  };
}

async function runApply(given: string, flags: ApplyOpts): Promise<number> {
  const deadline = Date.now() + parseDuration(flags.waitTimeout, '--wait-timeout');
  const engine = await loadEngine();
  const saved = isFile(given) ? engine.asSavedPlan(readFileSync(given, 'utf8')) : null;
  const { path, opts } = saved ? fromSavedPlan(given, flags, saved) : { path: given, opts: flags };
  const { client, projects, close } = await connect(opts);
  try {
    const options = await engineOptions(path, opts, projects);
    const { plan, documents, state, secrets } = await engine.preparePlan(client, [path], options);
    const json = opts.output === 'json';
    const previews = plan.errors.length ? [] : await engine.previewProvisioning(client, plan, state);
    if (!json)
      print(
        engine.renderPlan(plan, {
          colour: !!process.stdout.isTTY,
          sections: engine.renderProvisioningPreview(previews, plan) + engine.renderPlanHealth(plan),
          provisions: engine.provisioningCount(previews),
        }),
      );
    const refusal = plan.errors.length
      ? 'the plan has errors'
      : saved
        ? staleRefusal(engine.staleReasons(saved, plan, secrets, engine.fingerprintKeyOf(process.env)))
        : undefined;
    if (refusal) {
      if (json) print(`${JSON.stringify(engine.planJson(plan), null, 2)}\n`);
      process.stderr.write(`dpctl: nothing applied: ${refusal}\n`);
      return 1;
    }
    if (!opts.autoApprove && (engine.hasChanges(plan) || previews.some((p) => p.expected.length)) && !(await confirmed())) {
      process.stderr.write('dpctl: apply cancelled\n');
      return 1;
    }
    const progress = json
      ? undefined
      : progressPrinter(plan.changes.reduce((n, c) => n + (c.action === 'no-op' ? 0 : c.action === 'replace' ? 2 : 1), 0));
    const interrupt = stopOnInterrupt();
    try {
      const { signal } = interrupt;
      const result = await engine.applyPlan(client, plan, documents, state, secrets, {
        concurrency: options.concurrency!,
        onProgress: progress?.line,
        signal,
      });
      const settleOptions = {
        previews,
        wait: opts.wait,
        deadline,
        testConnections: opts.testConnections,
        concurrency: options.concurrency!,
        onProgress: progress?.line,
        onPhase: progress?.phase,
        signal,
      };
      // Stopped during the writes or the waits after them: report what was done, confirm nothing more.
      const settled = signal.aborted
        ? NOT_SETTLED
        : await engine.settle(client, plan, result, state, settleOptions).catch((err: unknown) => {
            if (signal.aborted) return NOT_SETTLED;
            throw err;
          });
      progress?.end();
      if (json) print(`${JSON.stringify(engine.applyReportJson(plan, result, settled), null, 2)}\n`);
      else print(engine.renderApplySummary(result, settled.failures.length, settled.checked) + engine.renderSettle(settled));
      if (signal.aborted) {
        process.stderr.write(`dpctl: ${STOPPED}\n`);
        return 1;
      }
      return result.converged && !settled.failures.length ? 0 : 1;
    } finally {
      interrupt.dispose();
    }
  } finally {
    await close();
  }
}

const STOPPED =
  'the apply was stopped: what it wrote is on the server; what it had not started, and the provisioning, connection tests and health of what it wrote, are left to the next apply';

/** What an apply stopped before or during its waits confirmed: nothing (the message above says so). */
const NOT_SETTLED = { provisioning: [], tests: [], health: [], failures: [], checked: false };

const isFile = (path: string) => {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
};

const staleRefusal = (reasons: string[]) =>
  reasons.length ? `the saved plan is stale, plan again:\n${reasons.map((r) => `  ${r}`).join('\n')}` : undefined;

/**
 * On a terminal, apply asks first, as terraform apply does; only "yes" goes on. Anywhere
 * else (CI, pipes) there is nobody to ask: it applies, as before.
 */
async function confirmed(): Promise<boolean> {
  if (!process.stdin.isTTY || !process.stdout.isTTY) return true;
  const { createInterface } = await import('node:readline/promises');
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    return (await rl.question('\nApply these changes? Only "yes" is accepted: ')).trim() === 'yes';
  } finally {
    rl.close();
  }
}

/**
 * Apply progress: on a terminal, a status line under the event lines counts what is done and
 * names the phase (redrawn in place); elsewhere (CI logs, pipes) plain event lines only.
 */
function progressPrinter(total: number): { line: (text: string) => void; phase: (label: string) => void; end: () => void } {
  if (!process.stdout.isTTY) return { line: (text) => print(`${text}\n`), phase: () => undefined, end: () => undefined };
  let done = 0;
  let label = 'applying';
  const clear = '\r\x1b[2K';
  const status = () => process.stdout.write(`\x1b[2m[${Math.min(done, total)}/${total}] ${label}...\x1b[0m`);
  return {
    line(text) {
      // Indented lines are notes about a resource already counted.
      if (!text.startsWith('  ')) done++;
      process.stdout.write(`${clear}${text}\n`);
      status();
    },
    phase(next) {
      label = next;
      process.stdout.write(clear);
      status();
    },
    end: () => void process.stdout.write(clear),
  };
}

/** `dpctl drift <path>`: 0 none, 2 drift, 1 error. */
export function driftCommand(): Command {
  return withCommon(
    new Command('drift').description("Report resources changed or deleted by hand, and unmanaged extras, in the config's projects"),
    ['text', 'json', 'markdown'],
  ).action((path: string, opts: CommonOpts) =>
    guarded(async () => {
      const { client, projects, close } = await connect(opts);
      try {
        const e = await loadEngine();
        const engine = await engineOptions(path, opts, projects);
        const { plan, drift } = await markdownOnConfigError('drift', opts.output, () => e.detectDrift(client, [path], engine));
        const notCompared = e.secretsNotCompared(plan);
        if (opts.output === 'json')
          print(
            `${JSON.stringify({ ...e.driftJson(plan.sourceId, drift, plan.errors), health: e.planHealthJson(plan), secrets_not_compared: notCompared }, null, 2)}\n`,
          );
        else
          print(
            opts.output === 'markdown'
              ? e.renderDriftMarkdown(plan.sourceId, drift, plan.errors) + e.renderSettleMarkdown([], plan)
              : e.renderDrift(drift) + e.renderSecretsNotCompared(notCompared) + e.renderPlanHealth(plan),
          );
        // JSON and markdown carry the errors themselves.
        for (const line of opts.output === 'text' ? e.problemLines(plan.errors) : []) process.stderr.write(`${line}\n`);
        return plan.errors.length ? 1 : drift.length ? 2 : 0;
      } finally {
        await close();
      }
    }),
  );
}
