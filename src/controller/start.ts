import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import type { Logger } from 'pino';
import type { LogFormat } from '../log-format.js';
import { FileTokenStore, secretFromFile, type ClientConfig } from '../client/index.js';
import { makeClient, parseConcurrency, rateLimitNotices, type ConnectionOpts } from '../client/options.js';
import { sourceIdProblem } from '../engine/index.js';
import { startController } from './controller.js';
import { Notifier, type Receiver } from './notify.js';
import { parseDuration } from './duration.js';
import { createElector, LeaseApi, type ElectorOptions } from './leader/index.js';
import { FileSuspensionStore, LeaseSuspensionStore, type SuspensionStore } from './suspension.js';
import { advertiseUrl, parseAdvertiseUrl, parseListen } from './server.js';
import { DirectorySource } from './source/directory.js';
import { GitSource } from './source/git.js';
import type { ConfigSource } from './source/types.js';

/** What `dpctl controller` does once its options are parsed (cli.ts); loaded only when it runs. */

export interface ControllerOpts extends ConnectionOpts {
  source: string;
  sourceType: 'auto' | 'git' | 'dir';
  branch: string;
  path: string;
  interval: string;
  waitTimeout: string;
  testConnections: boolean;
  mode: 'apply' | 'drift';
  prune: boolean;
  allowMassDelete: boolean;
  listen: string;
  advertiseUrl?: string;
  stateDir: string;
  webhookSecret?: string;
  webhookSecretFile?: string;
  suspend: boolean;
  leaderElection: 'none' | 'lock' | 'lease';
  lockFile?: string;
  leaseName: string;
  leaseNamespace?: string;
  leaseSeconds: string;
  identity?: string;
  apiKeyFile?: string;
  passwordFile?: string;
  sourceId?: string;
  /** --secrets-dir, repeatable. */
  secretsDir?: string[];
  concurrency: string;
  adopt: boolean;
  allowUndeclaredProjects: boolean;
  specOperations: boolean;
  logLevel: string;
  /** json or pretty; default: pretty when stdout is a terminal, else json (src/log-format.ts). */
  logFormat?: LogFormat;
  notifyWebhook?: string[];
  notifySlack?: string[];
  notifySecretFile?: string;
  notifyRepeat?: string;
}

/**
 * Notification receivers from the flags and the environment (a Secret's keys in a cluster):
 * DPCTL_NOTIFY_WEBHOOK_URLS and DPCTL_NOTIFY_SLACK_URLS (comma-separated), DPCTL_NOTIFY_SECRET
 * (or --notify-secret-file) signs the generic webhooks. Receiver URLs are secrets too (Slack's
 * holds its token): give them by environment in production, not flags (visible in `ps`).
 */
function receiversOf(opts: ControllerOpts): Receiver[] {
  const list = (flag: string[] | undefined, env: string | undefined) => [
    ...(flag ?? []),
    ...(env ?? '')
      .split(',')
      .map((u) => u.trim())
      .filter(Boolean),
  ];
  const secretFile = opts.notifySecretFile ?? process.env.DPCTL_NOTIFY_SECRET_FILE;
  const secret =
    secretFromFile('--notify-secret-file', secretFile) ?? (process.env.DPCTL_NOTIFY_SECRET || undefined);
  const checked = (url: string, what: string) => {
    if (!/^https?:\/\/[^/]/.test(url))
      throw new Error(`${what} must be an http(s) URL; got ${JSON.stringify(url.replace(/\/\/.*/, '//...'))}`);
    return url;
  };
  return [
    ...list(opts.notifyWebhook, process.env.DPCTL_NOTIFY_WEBHOOK_URLS).map((url): Receiver => ({
      type: 'webhook',
      url: checked(url, '--notify-webhook'),
      secret,
    })),
    ...list(opts.notifySlack, process.env.DPCTL_NOTIFY_SLACK_URLS).map((url): Receiver => ({
      type: 'slack',
      url: checked(url, '--notify-slack'),
    })),
  ];
}

/** A local directory that is not a git repository is a plain directory source; anything else goes through git. */
function isPlainDirectory(source: string): boolean {
  if (/^[a-z][a-z0-9+.-]*:/i.test(source) || /^[^/]+@[^/]+:/.test(source)) return false;
  if (!existsSync(source) || !statSync(source).isDirectory()) return false;
  const bare = existsSync(join(source, 'HEAD')) && existsSync(join(source, 'objects'));
  return !existsSync(join(source, '.git')) && !bare;
}

/** The ownership label value: as `dpctl apply <dir>` would pick it, so the controller can take over from it. */
function defaultSourceId(source: string, path: string, plain: boolean): string {
  if (path && path !== '.') return basename(resolve('/', path));
  if (plain) return basename(resolve(source));
  return basename(source.replace(/\/+$/, '')).replace(/\.git$/, '') || 'root';
}

/** The namespace a pod runs in (the service account's file), else `default`. */
function podNamespace(): string {
  try {
    return readFileSync('/var/run/secrets/kubernetes.io/serviceaccount/namespace', 'utf8').trim() || 'default';
  } catch {
    return process.env.POD_NAMESPACE || 'default';
  }
}

export async function startFromOptions(opts: ControllerOpts, log: Logger) {
  const intervalMs = parseDuration(opts.interval, '--interval');
  const waitTimeoutMs = parseDuration(opts.waitTimeout ?? '5m', '--wait-timeout');
  const receivers = receiversOf(opts);
  const notifyRepeatMs = parseDuration(opts.notifyRepeat ?? '1h', '--notify-repeat');
  const concurrency = parseConcurrency(opts.concurrency);
  const badSourceId = opts.sourceId === undefined ? undefined : sourceIdProblem(opts.sourceId);
  if (badSourceId) throw new Error(badSourceId);
  // The default (the last part of --path) is the same in every repository laid out alike
  // (`platform/`): two such controllers on one tenant would prune each other's projects.
  if (opts.prune && opts.sourceId === undefined)
    throw new Error(
      '--prune deletes what carries this controller\'s source id, so name it: --source-id <id>, unique per repository and tenant (the repository\'s name, say; `dpctl init` repositories use it)',
    );
  for (const dir of opts.secretsDir ?? [])
    if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory()) throw new Error(`--secrets-dir ${dir}: no such directory`);
  const leaseSeconds = Number(opts.leaseSeconds);
  if (!Number.isInteger(leaseSeconds) || leaseSeconds < 1)
    throw new Error(`--lease-seconds must be a whole number of seconds >= 1, got ${opts.leaseSeconds}`);
  const listen = parseListen(opts.listen);
  const explicitAdvertise = opts.advertiseUrl === undefined ? undefined : parseAdvertiseUrl(opts.advertiseUrl);
  // Read at every publication: with --listen ...:0 the port is known once the listener is up.
  let listenerUrl: string | undefined;
  const advertise = () => advertiseUrl({ explicit: explicitAdvertise, podIp: process.env.POD_IP, listenPort: listen.port, listenerUrl });
  const stateDir = resolve(opts.stateDir ?? process.env.DPCTL_STATE_DIR ?? '.dpctl-controller');
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });

  const webhookSecretFile = opts.webhookSecretFile ?? process.env.DPCTL_WEBHOOK_SECRET_FILE;
  const webhookSecret =
    opts.webhookSecret ??
    secretFromFile('--webhook-secret-file', webhookSecretFile) ??
    (process.env.DPCTL_WEBHOOK_SECRET || undefined);

  // Credentials: flags, then files (mounted secrets), then DATAPLATFORM_* variables.
  const apiKeyFile = opts.apiKeyFile ?? (process.env.DATAPLATFORM_API_KEY_FILE || undefined);
  const passwordFile = opts.passwordFile ?? (process.env.DATAPLATFORM_PASSWORD_FILE || undefined);
  const connection = { ...opts, apiKey: opts.apiKey ?? secretFromFile('--api-key-file', apiKeyFile) };
  const extra: Partial<ClientConfig> = { onEvent: rateLimitNotices((line) => log.info(line)) };
  if (passwordFile) extra.password = secretFromFile('--password-file', passwordFile);
  const usesApiKey = !!connection.apiKey || (!!process.env.DATAPLATFORM_API_KEY?.trim() && !passwordFile);
  // A password login's refresh token rotates on every refresh and a spent one revokes the session: keep it across restarts.
  if (!usesApiKey) extra.tokenStore = new FileTokenStore(join(stateDir, 'tokens.json'));
  if (usesApiKey && passwordFile) throw new Error('give either an API key or a password file, not both');
  const client = await makeClient(connection, extra);

  const plain = opts.sourceType === 'dir' || (opts.sourceType === 'auto' && isPlainDirectory(opts.source));
  const source: ConfigSource = plain
    ? new DirectorySource(opts.path && opts.path !== '.' ? join(opts.source, opts.path) : opts.source, {
        snapshotDir: join(stateDir, 'dir'),
      })
    : new GitSource({ url: opts.source, branch: opts.branch, path: opts.path, stateDir });

  const electorOptions: ElectorOptions =
    opts.leaderElection === 'lock'
      ? { kind: 'lock', path: resolve(opts.lockFile ?? join(stateDir, 'leader.lock')), identity: opts.identity, leaseSeconds, advertise }
      : opts.leaderElection === 'lease'
        ? {
            kind: 'lease',
            namespace: opts.leaseNamespace ?? podNamespace(),
            name: opts.leaseName,
            identity: opts.identity,
            leaseSeconds,
            advertise,
          }
        : { kind: 'none' };
  const elector = createElector(electorOptions, { log: (message) => log.info({ election: opts.leaderElection }, message) });
  // Suspension survives restarts and leader changes where the replicas meet: the state directory
  // (one replica), next to the shared lock file, or on the Lease itself.
  const suspension: SuspensionStore =
    electorOptions.kind === 'lease'
      ? new LeaseSuspensionStore(new LeaseApi(electorOptions.namespace, electorOptions.name))
      : new FileSuspensionStore(
          electorOptions.kind === 'lock' ? `${electorOptions.path}.suspended.json` : join(stateDir, 'suspended.json'),
          elector.identity,
        );

  const sourceId = opts.sourceId ?? defaultSourceId(opts.source, opts.path, plain);
  // Receivers' own CA (a receiver inside the cluster with a private CA); public ones need none.
  const notifyCa = process.env.DPCTL_NOTIFY_CA_FILE ? readFileSync(process.env.DPCTL_NOTIFY_CA_FILE, 'utf8') : undefined;
  const controller = await startController({
    source,
    client,
    mode: opts.mode,
    intervalMs,
    waitTimeoutMs,
    testConnections: opts.testConnections,
    notifier: receivers.length ? new Notifier({ receivers, source: sourceId, log, repeatMs: notifyRepeatMs, ca: notifyCa }) : undefined,
    listen,
    onListen: (url) => (listenerUrl = url),
    webhookSecret,
    suspended: opts.suspend,
    suspension,
    elector,
    logger: log,
    secretDirs: opts.secretsDir ?? [],
    engine: {
      sourceId,
      concurrency,
      prune: opts.prune,
      allowMassDelete: opts.allowMassDelete,
      adopt: opts.adopt,
      allowUndeclaredProjects: opts.allowUndeclaredProjects,
      specOperations: opts.specOperations,
    },
  });
  log.info(
    {
      source: source.description,
      mode: opts.mode,
      interval_ms: intervalMs,
      status: controller.url ? `${controller.url}/status` : null,
      webhook: webhookSecret ? 'on' : 'off',
      leader_election: elector.description,
      suspension: suspension.description,
      advertise_url: opts.leaderElection === 'none' ? null : (advertise() ?? null),
      state_dir: stateDir,
    },
    'controller started',
  );
  return controller;
}
