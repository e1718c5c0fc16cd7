import { Command, Option } from 'commander';
import type { Logger } from 'pino';
import { withConnection } from '../client/options.js';
import { LOG_FORMAT_HELP, LOG_FORMATS } from '../log-format.js';
import { watchParent } from '../parent-watch.js';
import type { ControllerOpts } from './start.js';
import type { RemoteCommand, RemoteOpts } from './remote.js';

/** The message commander gives for a missing required option: --source is checked by hand (a required option would refuse the subcommands). */
const MISSING_SOURCE = "error: required option '--source <git-url-or-dir>' not specified";

/** `dpctl controller status|suspend|resume|reconcile`: talk to a running controller (remote.ts, loaded when one runs). */
function remoteCommand(name: RemoteCommand, description: string, withSecret: boolean): Command {
  const cmd = new Command(name)
    .description(description)
    .option('--url <url>', "the controller's status listener (default DPCTL_CONTROLLER_URL, else http://127.0.0.1:9090)");
  if (withSecret)
    cmd.option(
      '--webhook-secret-file <file>',
      "the controller's webhook secret, sent as a bearer token (default DPCTL_WEBHOOK_SECRET_FILE, else DPCTL_WEBHOOK_SECRET)",
    );
  if (name === 'reconcile') cmd.option('--timeout <duration>', "how long to wait for the run's outcome", '5m');
  return cmd
    .addOption(new Option('--output <format>', 'output format').choices(['text', 'json']).default('text'))
    .action(async (own: RemoteOpts, self: Command) => {
      // `dpctl` parses every option it knows wherever it stands, so `controller status --url U` may reach
      // `controller`'s own --url (and --webhook-secret-file): they are this command's when it runs.
      const parent = (self.parent?.opts() ?? {}) as Pick<ControllerOpts, 'url' | 'webhookSecretFile'>;
      const opts: RemoteOpts = {
        ...own,
        url: own.url ?? parent.url,
        webhookSecretFile: withSecret ? (own.webhookSecretFile ?? parent.webhookSecretFile) : undefined,
      };
      const { runRemote, RemoteError } = await import('./remote.js');
      try {
        process.exitCode = await runRemote(name, opts);
      } catch (err) {
        if (!(err instanceof RemoteError)) throw err;
        process.stderr.write(`dpctl: ${err.message}\n`);
        process.exitCode = 1;
      }
    });
}

export function controllerCommand(): Command {
  const cmd = withConnection(
    new Command('controller').description(
      'Keep the platform equal to a git branch or a directory: reconcile continuously, report drift, correct it (apply mode)',
    ),
  )
    // The usage the command had before it had subcommands (they are listed under Commands).
    .usage('[options]')
    // `dpctl controller --url U status --output json`: what follows the subcommand's name is the subcommand's.
    .enablePositionalOptions();
  for (const options of [sourceOptions, listenerOptions, notifyOptions, electionOptions, planOptions, logOptions]) options(cmd);
  cmd.action(runController);
  for (const [name, description, withSecret] of REMOTE_COMMANDS) cmd.addCommand(remoteCommand(name, description, withSecret));
  return cmd;
}

/** What to reconcile, how often, and how. */
function sourceOptions(cmd: Command): void {
  cmd
    .option(
      '--source <git-url-or-dir>',
      'git URL, file:// URL or local repository path; or a plain directory (e.g. mounted by git-sync); required',
    )
    .addOption(
      new Option('--source-type <type>', 'how to read --source (auto: a local directory without .git is a plain directory)')
        .choices(['auto', 'git', 'dir'])
        .default('auto'),
    )
    .option('--branch <name>', 'git branch to follow', 'main')
    .option('--path <dir>', 'directory inside the repository that holds the YAML', '.')
    .option('--interval <duration>', 'time between runs (fetch, plan, apply), e.g. 30s, 5m', '30s')
    .option('--wait-timeout <duration>', 'how long a run waits for provisioning and health before reporting them progressing', '5m')
    .option(
      '--test-connections',
      "test the connection of each connector it writes, and once of each that has not run yet (a failed one: again after a back-off); a failed test makes the connector degraded",
      false,
    )
    .addOption(new Option('--mode <mode>', 'apply: make the platform match; drift: only report').choices(['apply', 'drift']).default('apply'))
    .option('--prune', 'delete managed resources (label dpctl.dev/managed-by = source id) that left the config; needs --source-id', false)
    .option('--allow-mass-delete', 'allow pruning more than max(5, 20%) of the managed resources', false);
}

/** The status listener, its webhook secret, the state directory and suspension. */
function listenerOptions(cmd: Command): void {
  cmd
    .option(
      '--listen <host:port>',
      'status listener: /healthz /readyz /metrics /status /hooks/git /suspend /resume /reconcile',
      '127.0.0.1:9090',
    )
    .option(
      '--advertise-url <url>',
      "URL of this replica's listener for the other replicas: the leader publishes it, standbys forward webhooks and suspend/resume to it (default: http://$POD_IP:<listen port> when POD_IP is set, else the listener's URL)",
    )
    .option('--state-dir <dir>', 'git mirror, checkouts, refresh token, lock (default DPCTL_STATE_DIR or ./.dpctl-controller)')
    .option(
      '--webhook-secret <secret>',
      'HMAC secret of POST /hooks/git, and bearer token of /suspend, /resume and /reconcile (default DPCTL_WEBHOOK_SECRET)',
    )
    .option('--webhook-secret-file <file>', 'read the webhook secret from a file (a mounted secret)')
    .option(
      '--suspend',
      'start suspended, and store it: kept across restarts and leader changes until resumed (dpctl controller resume)',
      false,
    );
}

/** Where events go. */
function notifyOptions(cmd: Command): void {
  cmd
    .option(
      '--notify-webhook <url>',
      'send events (applied, failed, drift, degraded/recovered, suspended) as signed JSON to this URL; repeatable (default DPCTL_NOTIFY_WEBHOOK_URLS, comma-separated: prefer the env, URLs are secrets)',
      (v: string, p: string[] = []) => [...p, v],
    )
    .option(
      '--notify-slack <url>',
      'send events to this Slack incoming webhook; repeatable (default DPCTL_NOTIFY_SLACK_URLS)',
      (v: string, p: string[] = []) => [...p, v],
    )
    .option(
      '--notify-secret-file <file>',
      "HMAC key of the webhook notifications' X-Dpctl-Signature-256 (default DPCTL_NOTIFY_SECRET_FILE, or DPCTL_NOTIFY_SECRET)",
    )
    .option('--notify-repeat <duration>', 'a condition that persists is notified again after this long', '1h');
}

/** Leader election between replicas. */
function electionOptions(cmd: Command): void {
  cmd
    .addOption(
      new Option('--leader-election <kind>', 'none: a single replica; lock: a lock file (local runs); lease: a Kubernetes Lease')
        .choices(['none', 'lock', 'lease'])
        .default('none'),
    )
    .option('--lock-file <file>', 'lock file for --leader-election lock (default <state-dir>/leader.lock)')
    .option('--lease-name <name>', 'Lease name for --leader-election lease', 'dpctl-controller')
    .option('--lease-namespace <ns>', "Lease namespace (default: the pod's namespace)")
    .option('--lease-seconds <n>', 'leadership lease duration in seconds', '15')
    .option('--identity <id>', "this replica's identity for leader election (default: pod name or host:pid)");
}

/** Credentials from files, and the engine's options as for `dpctl apply`. */
function planOptions(cmd: Command): void {
  cmd
    .option('--api-key-file <file>', 'read the API key from a file (default DATAPLATFORM_API_KEY_FILE)')
    .option('--password-file <file>', 'read the password of DATAPLATFORM_EMAIL from a file (default DATAPLATFORM_PASSWORD_FILE)')
    .option('--source-id <id>', 'ownership label value (default: the last part of --path, else the repository or directory name)')
    .option('--concurrency <n>', 'parallel API calls', '4')
    .option('--adopt', 'take ownership of existing resources the config declares that dpctl did not create', false)
    .option(
      '--allow-undeclared-projects',
      'metadata.project may name a project that exists on the server without a Project document',
      false,
    )
    .option('--spec-operations', 'plan with only the operations the spec documents', false)
    .option(
      '--secrets-dir <dir>',
      "a directory of mounted secrets that the config's file secretRefs may read (repeatable); otherwise only files in the repository",
      (value: string, previous: string[] = []) => [...previous, value],
    );
}

function logOptions(cmd: Command): void {
  cmd
    .addOption(
      new Option('--log-level <level>', 'log level: a run that changed nothing is logged at debug')
        .choices(['debug', 'info', 'warn', 'error'])
        .env('DPCTL_LOG_LEVEL')
        .default('info'),
    )
    .addOption(new Option('--log-format <format>', LOG_FORMAT_HELP).choices(LOG_FORMATS).env('DPCTL_LOG_FORMAT'));
}

/** `dpctl controller`: starts the controller and runs until SIGTERM or SIGINT. */
async function runController(opts: ControllerOpts, command: Command): Promise<void> {
  if (!opts.source) command.error(MISSING_SOURCE, { code: 'commander.missingMandatoryOptionValue' });
  // The controller (client, engine, git, HTTP listener, logger) loads when it runs.
  const [{ controllerLogger }, { startFromOptions }] = await Promise.all([import('./logger.js'), import('./start.js')]);
  const log = controllerLogger(opts.logLevel, opts.logFormat);
  try {
    stopOnSignals(await startFromOptions(opts, log), log);
  } catch (err) {
    log.fatal({ err: (err as Error).message }, 'controller did not start');
    process.stderr.write(`dpctl: ${(err as Error).message}\n`);
    process.exit(1);
  }
}

/**
 * SIGTERM, SIGINT or (under npm: `npx dpctl controller`, an npm script) the death of the parent
 * stops the controller (changes in flight finish) and exits; a second signal exits at once.
 */
function stopOnSignals(controller: { stop(): Promise<void> }, log: Logger): void {
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting at once');
      process.exit(1);
    }
    stopping = true;
    log.info({ signal }, 'shutting down');
    controller.stop().then(
      () => process.exit(0),
      (err: Error) => {
        log.error({ err: err.message }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  watchParent(() => shutdown('parent process exited'));
}

/** The subcommands that talk to a running controller: name, description, whether they send the webhook secret. */
const REMOTE_COMMANDS: Array<[RemoteCommand, string, boolean]> = [
  ['status', "show a running controller's status: ready, suspended, leader, revisions, last run, resources in trouble", false],
  ['suspend', 'suspend a running controller (through the leader; kept across restarts and leader changes)', true],
  ['resume', 'resume a suspended controller: it reconciles at once', true],
  [
    'reconcile',
    'make a running controller fetch and reconcile now, wait for that run: exit 0 when it converged (or is in sync), 1 otherwise',
    true,
  ],
];
