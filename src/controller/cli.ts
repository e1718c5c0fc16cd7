import { Command, Option } from 'commander';
import { withConnection } from '../cli/plan.js';
import { LOG_FORMAT_HELP, LOG_FORMATS } from '../log-format.js';
import type { ControllerOpts } from './start.js';

export function controllerCommand(): Command {
  return withConnection(new Command('controller').description('Keep the platform equal to a git branch or a directory: reconcile continuously, report drift, correct it (apply mode)'))
    .requiredOption('--source <git-url-or-dir>', 'git URL, file:// URL or local repository path; or a plain directory (e.g. mounted by git-sync)')
    .addOption(new Option('--source-type <type>', 'how to read --source (auto: a local directory without .git is a plain directory)').choices(['auto', 'git', 'dir']).default('auto'))
    .option('--branch <name>', 'git branch to follow', 'main')
    .option('--path <dir>', 'directory inside the repository that holds the YAML', '.')
    .option('--interval <duration>', 'time between runs (fetch, plan, apply), e.g. 30s, 5m', '30s')
    .option('--wait-timeout <duration>', 'how long a run waits for provisioning and health before reporting them progressing', '5m')
    .addOption(new Option('--mode <mode>', 'apply: make the platform match; drift: only report').choices(['apply', 'drift']).default('apply'))
    .option('--prune', 'delete managed resources (label dpctl.dev/managed-by = source id) that left the config', false)
    .option('--allow-mass-delete', 'allow pruning more than max(5, 20%) of the managed resources', false)
    .option('--listen <host:port>', 'status listener: /healthz /readyz /metrics /status /hooks/git /suspend /resume', '127.0.0.1:9090')
    .option('--advertise-url <url>', 'URL of this replica\'s listener for the other replicas: the leader publishes it, standbys forward webhooks and suspend/resume to it (default: http://$POD_IP:<listen port> when POD_IP is set, else the listener\'s URL)')
    .option('--state-dir <dir>', 'git mirror, checkouts, refresh token, lock (default DPCTL_STATE_DIR or ./.dpctl-controller)')
    .option('--webhook-secret <secret>', 'HMAC secret of POST /hooks/git, and bearer token of /suspend and /resume (default DPCTL_WEBHOOK_SECRET)')
    .option('--webhook-secret-file <file>', 'read the webhook secret from a file (a mounted secret)')
    .option('--suspend', 'start suspended (POST /resume to start reconciling)', false)
    .option('--notify-webhook <url>', 'send events (applied, failed, drift, degraded/recovered, suspended) as signed JSON to this URL; repeatable (default DPCTL_NOTIFY_WEBHOOK_URLS, comma-separated: prefer the env, URLs are secrets)', (v: string, p: string[] = []) => [...p, v])
    .option('--notify-slack <url>', 'send events to this Slack incoming webhook; repeatable (default DPCTL_NOTIFY_SLACK_URLS)', (v: string, p: string[] = []) => [...p, v])
    .option('--notify-secret-file <file>', 'HMAC key of the webhook notifications\' X-Dpctl-Signature-256 (default DPCTL_NOTIFY_SECRET_FILE, or DPCTL_NOTIFY_SECRET)')
    .option('--notify-repeat <duration>', 'a condition that persists is notified again after this long', '1h')
    .addOption(new Option('--leader-election <kind>', 'none: a single replica; lock: a lock file (local runs); lease: a Kubernetes Lease').choices(['none', 'lock', 'lease']).default('none'))
    .option('--lock-file <file>', 'lock file for --leader-election lock (default <state-dir>/leader.lock)')
    .option('--lease-name <name>', 'Lease name for --leader-election lease', 'dpctl-controller')
    .option('--lease-namespace <ns>', 'Lease namespace (default: the pod\'s namespace)')
    .option('--lease-seconds <n>', 'leadership lease duration in seconds', '15')
    .option('--identity <id>', 'this replica\'s identity for leader election (default: pod name or host:pid)')
    .option('--api-key-file <file>', 'read the API key from a file (default DATAPLATFORM_API_KEY_FILE)')
    .option('--password-file <file>', 'read the password of DATAPLATFORM_EMAIL from a file (default DATAPLATFORM_PASSWORD_FILE)')
    .option('--source-id <id>', 'ownership label value (default: the last part of --path, else the repository or directory name)')
    .option('--concurrency <n>', 'parallel API calls', '4')
    .option('--adopt', 'take ownership of existing resources the config declares that dpctl did not create', false)
    .option('--allow-undeclared-projects', 'metadata.project may name a project that exists on the server without a Project document', false)
    .option('--spec-operations', 'plan with only the operations the spec documents', false)
    .addOption(new Option('--log-level <level>', 'log level: a run that changed nothing is logged at debug').choices(['debug', 'info', 'warn', 'error']).env('DPCTL_LOG_LEVEL').default('info'))
    .addOption(new Option('--log-format <format>', LOG_FORMAT_HELP).choices(LOG_FORMATS).env('DPCTL_LOG_FORMAT'))
    .action(async (opts: ControllerOpts) => {
      // The controller (client, engine, git, HTTP listener, logger) loads when it runs.
      const [{ controllerLogger }, { startFromOptions }] = await Promise.all([import('./logger.js'), import('./start.js')]);
      const log = controllerLogger(opts.logLevel, opts.logFormat);
      try {
        const controller = await startFromOptions(opts, log);
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
      } catch (err) {
        log.fatal({ err: (err as Error).message }, 'controller did not start');
        process.stderr.write(`dpctl: ${(err as Error).message}\n`);
        process.exit(1);
      }
    });
}
