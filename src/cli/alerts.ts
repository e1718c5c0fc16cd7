import { Command, Option } from 'commander';
import type { Alert, AlertFilters, DataPlatformClient } from '../client/index.js';
import { makeClient, withConnection, type ConnectionOpts } from '../client/options.js';
import { guarded } from './plan.js';

/**
 * `dpctl alerts list / ack / resolve`: the project's alerts (spec section 4, Monitoring) from a
 * terminal or a CI job, without the web interface.
 */

type Output = 'text' | 'json';
type Connection = ConnectionOpts;

interface ListOpts extends Connection {
  project: string;
  status?: Alert['status'] | 'open';
  severity?: Alert['severity'];
  output: Output;
}

interface TransitionOpts extends Connection {
  project: string;
  output: Output;
}

// The enums of schemas/kinds/alert.schema.json; `open` is not a state: firing or acknowledged.
const STATUSES = ['firing', 'acknowledged', 'resolved', 'open'];
const SEVERITIES = ['info', 'warning', 'critical'];

export function alertsCommand(): Command {
  const alerts = new Command('alerts').description("List a project's alerts, acknowledge and resolve them");
  alerts.addCommand(listCommand());
  alerts.addCommand(transitionCommand('ack', 'acknowledge', 'Acknowledge a firing alert (firing -> acknowledged)'));
  alerts.addCommand(transitionCommand('resolve', 'resolve', 'Resolve a firing or acknowledged alert (-> resolved)'));
  return alerts;
}

const projectOption = (cmd: Command) => cmd.requiredOption('--project <name>', 'the project (its name)');
const outputOption = (cmd: Command, json: string) =>
  cmd.addOption(new Option('-o, --output <format>', `output format (json: ${json})`).choices(['text', 'json']).default('text'));

function listCommand(): Command {
  const cmd = projectOption(
    withConnection(new Command('list').description('List alerts, oldest first: id, severity, status, rule, fired time, message')),
  );
  cmd
    .addOption(new Option('--status <status>', 'only alerts in this state (open: firing or acknowledged)').choices(STATUSES))
    .addOption(new Option('--severity <severity>', 'only alerts of this severity').choices(SEVERITIES));
  return outputOption(cmd, 'the alerts, as the API returns them').action((opts: ListOpts) =>
    guarded(() =>
      withClient(opts, async (client) => {
        const projectId = await projectIdOf(client, opts.project);
        const [alerts, rules] = await Promise.all([listAlerts(client, projectId, opts), ruleNames(client, projectId)]);
        if (opts.output === 'json') print(json(alerts));
        else print(alerts.length ? renderTable(alerts, rules) : 'No alerts.\n');
        return 0;
      }),
    ),
  );
}

function transitionCommand(name: string, verb: 'acknowledge' | 'resolve', description: string): Command {
  const cmd = projectOption(
    withConnection(new Command(name).description(description).argument('<alert-id>', "the alert's id (see dpctl alerts list)")),
  );
  return outputOption(cmd, 'the alert after the change').action((alertId: string, opts: TransitionOpts) =>
    guarded(() =>
      withClient(opts, async (client) => {
        const alerts = client.alerts(await projectIdOf(client, opts.project));
        // A 404 (no such alert in the project) or 409 (e.g. acknowledging a resolved alert) is the service's message, exit 1.
        const alert = verb === 'acknowledge' ? await alerts.acknowledge(alertId) : await alerts.resolve(alertId);
        print(opts.output === 'json' ? json(alert) : `alert ${alert.id} ${alert.status}\n`);
        return 0;
      }),
    ),
  );
}

/** A client for one command body, closed after it. */
async function withClient(opts: Connection, fn: (client: DataPlatformClient) => Promise<number>): Promise<number> {
  const client = await makeClient(opts);
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

async function projectIdOf(client: DataPlatformClient, name: string): Promise<string> {
  const project = await client.projects.findByName(name);
  if (!project) throw new Error(`project "${name}" not found`);
  return project.id;
}

/** Every matching alert, all pages. `open` is two filtered lists merged in firing order. */
async function listAlerts(client: DataPlatformClient, projectId: string, opts: ListOpts): Promise<Alert[]> {
  const endpoint = client.alerts(projectId);
  const severity: AlertFilters = opts.severity ? { severity: opts.severity } : {};
  if (opts.status !== 'open') return endpoint.listAll({ ...severity, ...(opts.status ? { status: opts.status } : {}) });
  const lists = await Promise.all((['firing', 'acknowledged'] as const).map((status) => endpoint.listAll({ ...severity, status })));
  return lists.flat().sort((a, b) => a.fired_at.localeCompare(b.fired_at) || a.id.localeCompare(b.id));
}

/** Rule id -> name, so the table shows what fired rather than an id. */
async function ruleNames(client: DataPlatformClient, projectId: string): Promise<Map<string, string>> {
  const rules = await client.resources('alert_rule', { projectId }).listAll();
  return new Map(rules.map((r) => [r.id, r.name]));
}

const print = (s: string) => void process.stdout.write(s);
const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

/** An aligned table; the message, the widest column, is last and unpadded. */
function renderTable(alerts: Alert[], rules: Map<string, string>): string {
  const rows = alerts.map((a) => [
    a.id,
    a.severity,
    a.status,
    rules.get(a.alert_rule_id) ?? a.alert_rule_id,
    firedAt(a.fired_at),
    a.message,
  ]);
  const header = ['ID', 'SEVERITY', 'STATUS', 'RULE', 'FIRED', 'MESSAGE'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => `${cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]))).join('  ')}\n`;
  return [header, ...rows].map(line).join('');
}

/** `2024-05-01T12:00:03.123Z` -> `2024-05-01 12:00:03Z`: to the second, still UTC. */
const firedAt = (iso: string) => iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z');
