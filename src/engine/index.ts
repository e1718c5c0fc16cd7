/**
 * The reconciler engine: observe (list calls) -> diff (descriptor rules) -> plan (whole graph)
 * -> apply (reference order, bounded concurrency); drift report. No per-kind code.
 */
import { basename, dirname, resolve } from 'node:path';
import { statSync } from 'node:fs';
import type { DataPlatformClient } from '../client/index.js';
import { SCOPE_CONTAINER } from '../kinds/index.js';
import {
  errorLines,
  formatConfigError,
  loadConfigInTurns,
  resolveSecrets,
  sortErrors,
  type Confinement,
  type ConfigDocument,
  type ConfigError,
  type ConfigParseCache,
  type LoadedConfig,
  type ResolvedSecrets,
} from '../config/index.js';
import { applyPlan, type ApplyResult } from './apply.js';
import { driftReport, type DriftEntry } from './drift.js';
import { observe, type LiveState } from './observe.js';
import { makePlanInTurns, type Plan, type PlanOptions } from './plan.js';
import { attachHealth } from './health.js';
import { fingerprintKeyOf } from './fingerprint.js';
import { restrictToTargets, type Target } from './targets.js';

export * from './diff.js';
export * from './fingerprint.js';
export * from './observe.js';
export * from './plan.js';
export * from './apply.js';
export * from './schedule.js';
export * from './drift.js';
export * from './format.js';
export * from './export.js';
export * from './adopt.js';
export * from './health.js';
export * from './provisioning.js';
export * from './problems.js';
export * from './settle.js';
export * from './settle-format.js';
export * from './saved-plan.js';
export * from './targets.js';

/** Default source id: the name of the config's directory (of the first path; a file's own directory). */
export function defaultSourceId(path: string): string {
  const abs = resolve(path);
  let dir = abs;
  try {
    if (!statSync(abs).isDirectory()) dir = dirname(abs);
  } catch {
    // loadConfig reports a missing path.
  }
  return basename(dir) || 'root';
}

/**
 * Why a source id cannot be one, or undefined. It is the value of the managed-by label on
 * everything the source manages, so it is what a label value may be (the kinds' `labels` schema:
 * at most 256 characters), and never empty or padded: an empty id would meet every resource as
 * another source's, and apply would label its creations with nothing.
 */
export function sourceIdProblem(id: string): string | undefined {
  const labels = SCOPE_CONTAINER.createSchema.properties?.labels?.additionalProperties;
  const max = (typeof labels === 'object' ? labels.maxLength : undefined) ?? Infinity;
  if (!id.trim()) return 'the source id is empty: pass --source-id <id>';
  if (id !== id.trim() || /\p{Cc}/u.test(id)) return `the source id ${JSON.stringify(id)} has spaces around it or control characters`;
  if (id.length > max) return `the source id is ${id.length} characters long; a label value holds at most ${max}`;
  return undefined;
}

export interface EngineOptions extends Partial<PlanOptions> {
  sourceId: string;
  /** Read the configuration confined to its repository (the controller); unset for the CLI. */
  confine?: Confinement;
  concurrency?: number;
  allowUndeclaredProjects?: boolean;
  env?: Record<string, string | undefined>;
  /** Observe every declarable kind (prune, drift), not only the kinds the config uses. */
  allKinds?: boolean;
  /** Error locations are shown relative to this directory (default: the working directory). */
  cwd?: string;
  /** Reuses the parse of unchanged files across loads (the controller plans the same files every run). */
  parseCache?: ConfigParseCache;
  /**
   * The live projects, listed since before the config was loaded (listProjects): awaited once the
   * config is valid. With a config error it is never awaited (the caller aborts it).
   */
  projects?: Promise<Record<string, unknown>[]>;
  /** --target: plan only these resources and what they need (see targets.ts). */
  targets?: Target[];
}

export interface Prepared {
  documents: ConfigDocument[];
  secrets: ResolvedSecrets;
  state: LiveState;
  plan: Plan;
}

/** Thrown for configuration errors (nothing was contacted, or nothing changed), root causes first. */
export class EngineConfigError extends Error {
  constructor(readonly errors: ConfigError[]) {
    // The followers of a root cause as dpctl validate shows them (the first few and a count when many); `errors` holds them all.
    super(errorLines(errors.map((e) => ({ text: formatConfigError(e), follows: e.follows === true }))).join('\n'));
    this.name = 'EngineConfigError';
  }
}

/**
 * The config loaded and validated, and its secrets read (confined to its repository when
 * `confine` says so), with every error of both in the order they are shown. In turns: the
 * controller answers /healthz and webhooks while it loads (a CLI does not mind).
 */
export async function loadDeclared(
  paths: string[],
  options: Pick<EngineOptions, 'allowUndeclaredProjects' | 'cwd' | 'parseCache' | 'confine' | 'env'>,
): Promise<{ config: LoadedConfig; secrets: ResolvedSecrets; errors: ConfigError[] }> {
  const { config, errors } = await loadConfigInTurns(paths, {
    allowUndeclaredProjects: options.allowUndeclaredProjects ?? false,
    cwd: options.cwd,
    cache: options.parseCache,
    confineTo: options.confine?.root,
  });
  const resolved = resolveSecrets(config.documents, { env: options.env ?? process.env, confine: options.confine });
  return { config, secrets: resolved.secrets, errors: sortErrors([...errors, ...resolved.errors], config.files) };
}

/** Loads and validates the config, resolves secrets, observes and plans. */
export async function preparePlan(client: DataPlatformClient, paths: string[], options: EngineOptions): Promise<Prepared> {
  const badSourceId = sourceIdProblem(options.sourceId);
  if (badSourceId) throw new Error(badSourceId);
  const { config, secrets, errors } = await loadDeclared(paths, options);
  if (errors.length) throw new EngineConfigError(errors);
  const prune = options.prune ?? false;
  const state = await observe(client, config.documents, {
    allKinds: options.allKinds ?? prune,
    concurrency: options.concurrency ?? 4,
    sourceId: options.sourceId,
    projects: options.projects,
  });
  const full = await makePlanInTurns(config.documents, state, secrets, {
    sourceId: options.sourceId,
    prune,
    allowMassDelete: options.allowMassDelete ?? false,
    adopt: options.adopt ?? false,
    specOperations: options.specOperations ?? false,
    sourceIdDefaulted: options.sourceIdDefaulted ?? false,
    fingerprintKey: fingerprintKeyOf(options.env ?? process.env),
  });
  const plan = restrictToTargets(full, config.documents, options.targets ?? []);
  attachHealth(plan);
  return { documents: config.documents, secrets, state, plan };
}

/** Plans and, when the plan has no errors, applies. */
export async function reconcile(
  client: DataPlatformClient,
  paths: string[],
  options: EngineOptions & { onProgress?: (line: string) => void },
): Promise<Prepared & { result?: ApplyResult }> {
  const prepared = await preparePlan(client, paths, options);
  if (prepared.plan.errors.length) return prepared;
  const result = await applyPlan(client, prepared.plan, prepared.documents, prepared.state, prepared.secrets, {
    concurrency: options.concurrency ?? 4,
    onProgress: options.onProgress,
  });
  return { ...prepared, result };
}

/** Drift: a plan with prune over every declarable kind, as a report. */
export async function detectDrift(
  client: DataPlatformClient,
  paths: string[],
  options: EngineOptions,
): Promise<Prepared & { drift: DriftEntry[] }> {
  const prepared = await preparePlan(client, paths, { ...options, prune: true, allowMassDelete: true, allKinds: true });
  return { ...prepared, drift: driftReport(prepared.plan, prepared.documents, prepared.state) };
}
