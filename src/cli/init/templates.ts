/**
 * The files `dpctl init` writes for a team's new configuration repository, per format. Pure: a
 * map of relative path -> content, so tests can validate every starter without a file system.
 * The example platform is one project ("starter": the demo tenant of `npm start` uses other
 * names) with a Postgres connector, an email channel and an alert rule on the connector's syncs.
 */

export const INIT_FORMATS = ['yaml', 'cdktf', 'hcl'] as const;
export type InitFormat = (typeof INIT_FORMATS)[number];

export interface ScaffoldOptions {
  format: InitFormat;
  /** The package's name and the version spec the new package.json depends on. */
  packageName: string;
  packageSpec: string;
  /** Version of the provider in required_providers. */
  providerVersion: string;
  /** The repository's name (the directory's), used in package.json. */
  repoName: string;
  /** The repository's source id (`dpctl init --source-id`, default the repository's name): see sourceFlag. */
  sourceId: string;
}

const PROJECT = 'starter';

export function scaffold(o: ScaffoldOptions): Map<string, string> {
  const files = new Map<string, string>([
    ['.gitignore', gitignore()],
    ['README.md', readme(o)],
    ['.github/workflows/platform.yml', workflow(o)],
  ]);
  if (o.format === 'yaml') {
    files.set('platform/projects.yaml', yamlProjects(o));
    files.set(`platform/${PROJECT}/sources.yaml`, yamlSources(o));
    files.set(`platform/${PROJECT}/warehouse.yaml`, yamlWarehouse(o));
    files.set('.vscode/settings.json', vscodeSettings(o));
  } else if (o.format === 'cdktf') {
    // The app is type-checked before it runs (as cdktf's own template does with ts-node): tsx alone
    // strips the types, and a misspelt attribute became a plan that clears the attribute.
    files.set(
      'cdktf.json',
      `${JSON.stringify({ language: 'typescript', app: 'tsc && tsx main.ts', projectId: o.repoName, sendCrashReports: 'false', terraformProviders: [], terraformModules: [], context: {} }, null, 2)}\n`,
    );
    files.set('main.ts', cdktfMain(o));
    files.set(
      'tsconfig.json',
      `${JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, skipLibCheck: true, noEmit: true }, include: ['*.ts'] }, null, 2)}\n`,
    );
  } else {
    files.set('main.tf', hclMain(o));
    files.set('network-mirror.tfrc', hclMirrorConfig());
  }
  return files;
}

/** The package.json fields a format needs; merged into an existing package.json by `dpctl init`. */
export function packageFields(o: ScaffoldOptions): {
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
} {
  const dependencies: Record<string, string> = { [o.packageName]: o.packageSpec };
  const common = { provider: 'dpctl provider install' };
  if (o.format === 'yaml') {
    return {
      scripts: {
        ...common,
        validate: 'dpctl validate platform',
        plan: `dpctl plan platform ${sourceFlag(o)}`,
        apply: `dpctl apply platform ${sourceFlag(o)}`,
      },
      dependencies,
      devDependencies: {},
    };
  }
  if (o.format === 'hcl') return { scripts: common, dependencies, devDependencies: {} };
  return {
    scripts: {
      ...common,
      synth: 'cdktf synth',
      // cdktf runs `terraform providers lock` after init, which asks the public registry, where
      // this provider is not: --skip-provider-lock (terraform init still writes the lock file).
      diff: 'cdktf diff platform --skip-provider-lock',
      deploy: 'cdktf deploy platform --auto-approve --skip-provider-lock',
      destroy: 'cdktf destroy platform --auto-approve --skip-provider-lock',
    },
    dependencies: { ...dependencies, cdktf: '^0.21.0', constructs: '^10.4.0' },
    devDependencies: { 'cdktf-cli': '^0.21.0', tsx: '^4.19.0', typescript: '^5.6.0', '@types/node': '^20.0.0' },
  };
}

function gitignore(): string {
  return [
    '# Dependencies and build output',
    'node_modules/',
    'cdktf.out/',
    '# Terraform: providers, state (keep state in a backend), plans',
    '.terraform/',
    '*.tfstate',
    '*.tfstate.*',
    '*.tfplan',
    'crash.log',
    '# Secrets: never in git (secretRef env/file, TF_VAR_*)',
    '.env',
    '.env.*',
    'secrets/',
    '*.pem',
    '*.key',
    '*.secret',
    '# A local reference service',
    '.dpctl-data/',
    '',
  ].join('\n');
}

const header = (depth: number) =>
  `# yaml-language-server: $schema=${'../'.repeat(depth)}node_modules/dataplatform-as-code/schemas/document.schema.json\n`;

function yamlProjects(o: ScaffoldOptions): string {
  return `${header(1).replace('dataplatform-as-code', o.packageName)}# The projects of the platform. Everything else names its project in metadata.project.
apiVersion: dataplatform/v1
kind: Project
metadata:
  name: ${PROJECT}
  labels:
    owner: data-platform
spec:
  description: A first project, managed from git by ${o.repoName}.
`;
}

function yamlSources(o: ScaffoldOptions): string {
  return `${header(2).replace('dataplatform-as-code', o.packageName)}apiVersion: dataplatform/v1
kind: Connector
metadata:
  name: orders-db
  project: ${PROJECT}
spec:
  connector_type: postgresql
  config:
    host: orders.db.internal      # a placeholder: your database's host (CI tests the connection on apply)
    port: 5432
    database: orders
    schema: public
  credentials:
    username: replicator
    password:
      secretRef:
        env: ORDERS_DB_PASSWORD   # never in git: set it in CI's secrets and your shell
  selected_tables: [public.orders, public.customers]
  schedule: "0 * * * *"
---
apiVersion: dataplatform/v1
kind: NotificationChannel
metadata:
  name: data-team-email
  project: ${PROJECT}
spec:
  type: email
  config:
    email_addresses: [data-team@example.com]
---
apiVersion: dataplatform/v1
kind: AlertRule
metadata:
  name: orders-sync-failed
  project: ${PROJECT}
spec:
  severity: critical
  condition:
    metric: run_failed
    operator: gte
    threshold: 1
    window_minutes: 60
  target:
    connector: orders-db
  channels: [data-team-email]
`;
}

/** A warehouse: dpctl apply provisions it through the platform's plan and apply, and waits until it is. */
function yamlWarehouse(o: ScaffoldOptions): string {
  return `${header(2).replace('dataplatform-as-code', o.packageName)}# Provisioned by the platform: \`dpctl apply\` waits until it is provisioned (or fails naming why).
apiVersion: dataplatform/v1
kind: InfrastructureResource
metadata:
  name: warehouse
  project: ${PROJECT}
spec:
  resource_type: warehouse
  provider: snowflake
  region: eu-west-1   # region, provider and resource_type cannot change in place: a change replaces it
  config:
    size: XSMALL
`;
}

function vscodeSettings(o: ScaffoldOptions): string {
  return `${JSON.stringify({ 'yaml.schemas': { [`./node_modules/${o.packageName}/schemas/document.schema.json`]: ['platform/**/*.yaml'] } }, null, 2)}\n`;
}

function cdktfMain(o: ScaffoldOptions): string {
  return `/**
 * The platform as a CDK for Terraform app: \`npm run synth\`, \`npm run deploy\`.
 * The provider reads DATAPLATFORM_URL, DATAPLATFORM_API_KEY (or DATAPLATFORM_EMAIL and
 * DATAPLATFORM_PASSWORD) and DATAPLATFORM_CA_FILE; secrets are Terraform variables (TF_VAR_...).
 */
import { App, TerraformOutput, TerraformStack } from 'cdktf';
import type { Construct } from 'constructs';
import { InfrastructureResource, Platform, secret } from '${o.packageName}/cdktf';

class PlatformStack extends TerraformStack {
  constructor(scope: Construct, id: string) {
    super(scope, id);
    const platform = new Platform(this, 'platform');
    const project = platform.addProject('${PROJECT}', { description: 'A first project, managed from git by ${o.repoName}.', labels: { owner: 'data-platform' } });
    const orders = project.addConnector('orders-db', {
      connectorType: 'postgresql',
      config: { host: 'orders.db.internal', port: 5432, database: 'orders', schema: 'public' },
      // TF_VAR_ORDERS_DB_PASSWORD; never written to cdktf.out.
      credentials: { username: 'replicator', password: secret(this, 'ORDERS_DB_PASSWORD') },
      selectedTables: ['public.orders', 'public.customers'],
      schedule: '0 * * * *',
      // Test the connection at deploy, which then fails while the host or credentials are wrong
      // (without it, the deploy warns that the connection is untested until the first sync).
      // runSetupTests: true,
    });
    // Provisioned by the platform: the deploy waits until it is (timeouts: create 30m by default).
    project.add(InfrastructureResource, 'warehouse', { resourceType: 'warehouse', providerName: 'snowflake', region: 'eu-west-1', config: { size: 'XSMALL' } });
    const email = project.addNotificationChannel('data-team-email', { type: 'email', config: { emailAddresses: ['data-team@example.com'] } });
    project.addAlertRule('orders-sync-failed', {
      severity: 'critical',
      condition: { metric: 'run_failed', operator: 'gte', threshold: 1, windowMinutes: 60 },
      target: { connectorId: orders.id },
      channelIds: [email.id],
    });
    new TerraformOutput(this, 'project_id', { value: project.project.id });
  }
}

const app = new App();
new PlatformStack(app, 'platform');
app.synth();
`;
}

function hclMain(o: ScaffoldOptions): string {
  return `# The platform as a Terraform configuration. Install the provider first: \`npx dpctl provider install\`
# (a filesystem mirror in ~/.terraform.d/plugins, found with no CLI config), or use the service's
# network mirror (network-mirror.tfrc). The provider reads DATAPLATFORM_URL, DATAPLATFORM_API_KEY
# (or DATAPLATFORM_EMAIL + DATAPLATFORM_PASSWORD) and DATAPLATFORM_CA_FILE.
terraform {
  required_providers {
    dataplatform = {
      source  = "dataplatform/dataplatform"
      version = "${o.providerVersion}"
    }
  }
}

provider "dataplatform" {}

variable "orders_db_password" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "dataplatform_project" "${PROJECT}" {
  name        = "${PROJECT}"
  description = "A first project, managed from git by ${o.repoName}."
  labels = {
    owner = "data-platform"
  }
}

resource "dataplatform_connector" "orders" {
  project_id     = dataplatform_project.${PROJECT}.id
  name           = "orders-db"
  connector_type = "postgresql"
  config = {
    host     = "orders.db.internal"
    port     = 5432
    database = "orders"
    schema   = "public"
  }
  credentials = {
    username = "replicator"
    # Write-only: never kept in the plan or the state; bump the version to send a new password.
    password_wo         = var.orders_db_password
    password_wo_version = 1
  }
  selected_tables = ["public.orders", "public.customers"]
  schedule        = "0 * * * *"
  # Test the connection at apply, which then fails while the host or credentials are wrong
  # (without it, the apply warns that the connection is untested until the first sync).
  # run_setup_tests = true
}

# Provisioned by the platform: the apply waits until it is provisioned, or fails naming why.
resource "dataplatform_infrastructure_resource" "warehouse" {
  project_id    = dataplatform_project.${PROJECT}.id
  name          = "warehouse"
  resource_type = "warehouse"
  provider_name = "snowflake"
  region        = "eu-west-1"
  config = {
    size = "XSMALL"
  }
  timeouts {
    create = "30m"
  }
}

resource "dataplatform_notification_channel" "email" {
  project_id = dataplatform_project.${PROJECT}.id
  name       = "data-team-email"
  type       = "email"
  config = {
    email_addresses = ["data-team@example.com"]
  }
}

resource "dataplatform_alert_rule" "orders_sync_failed" {
  project_id = dataplatform_project.${PROJECT}.id
  name       = "orders-sync-failed"
  severity   = "critical"
  condition = {
    metric         = "run_failed"
    operator       = "gte"
    threshold      = 1
    window_minutes = 60
  }
  target = {
    connector_id = dataplatform_connector.orders.id
  }
  channel_ids = [dataplatform_notification_channel.email.id]
}

output "project_id" {
  value = dataplatform_project.${PROJECT}.id
}
`;
}

function hclMirrorConfig(): string {
  return `# Terraform CLI configuration that installs the provider from a network mirror: the
# reference service serves its own provider release at /terraform/providers/, and a release
# written by \`dpctl provider package --out DIR\` can be published on any HTTPS file server.
#   export TF_CLI_CONFIG_FILE=$PWD/network-mirror.tfrc
#   export SSL_CERT_FILE=/path/to/the/service/ca.pem   # for a private CA
# The service answers /terraform/providers/ on every one of its host names. Terraform does not
# resolve tenant names under .localhost (demo.localhost) the way browsers and curl do, so a local
# service is reached as localhost.
provider_installation {
  network_mirror {
    url     = "https://localhost:8443/terraform/providers/"
    include = ["registry.terraform.io/dataplatform/*"]
  }
  direct {
    exclude = ["registry.terraform.io/dataplatform/*"]
  }
}
`;
}

/**
 * The ownership label every `dpctl plan | apply` of this repository writes and reads (`--source-id`).
 * Without it the id is the config directory's name, `platform` in every repository `dpctl init`
 * makes, and two such repositories applying to one tenant would each prune the other's resources.
 */
export const sourceFlag = (o: Pick<ScaffoldOptions, 'sourceId'>) => `--source-id ${o.sourceId}`;

/**
 * Per format: how CI plans (writing plan.md for the PR comment; `code` is the plan's exit status,
 * taken inside the braces: after them `$?` is the last echo's) and applies.
 */
function ciSteps(o: ScaffoldOptions): { setup: string[]; plan: string; apply: string } {
  if (o.format === 'yaml') {
    return {
      setup: [],
      plan: `npx dpctl validate platform\nnpx dpctl plan platform ${sourceFlag(o)} --output markdown > plan.md; code=$?`,
      // --test-connections: a connector whose host or credentials are wrong fails the job at once,
      // instead of an apply that passes and a first sync that fails later.
      apply: `npx dpctl apply platform ${sourceFlag(o)} --test-connections`,
    };
  }
  const terraform = [
    '      - uses: hashicorp/setup-terraform@v3',
    '        with: { terraform_wrapper: false }',
    '      - run: npx dpctl provider install',
  ];
  if (o.format === 'cdktf') {
    return {
      setup: terraform,
      plan: "npm run synth\n{ echo '```'; npm run --silent diff -- --no-color; code=$?; echo '```'; } > plan.md",
      apply: 'npm run deploy',
    };
  }
  return {
    setup: terraform,
    plan: "terraform init -input=false\n{ echo '```'; terraform plan -input=false -no-color -detailed-exitcode; code=$?; echo '```'; } > plan.md",
    apply: 'terraform init -input=false && terraform apply -input=false -auto-approve',
  };
}

const indent = (text: string, spaces: number) =>
  text
    .split('\n')
    .map((l) => `${' '.repeat(spaces)}${l}`)
    .join('\n');

function workflow(o: ScaffoldOptions): string {
  const steps = ciSteps(o);
  const secretEnv = o.format === 'yaml' ? 'ORDERS_DB_PASSWORD' : 'TF_VAR_orders_db_password';
  const secretName = o.format === 'cdktf' ? 'TF_VAR_ORDERS_DB_PASSWORD' : secretEnv;
  const prepare = [
    '      - uses: actions/checkout@v4',
    '      - uses: actions/setup-node@v4',
    '        with: { node-version: 20, cache: npm }',
    '      - run: npm ci',
    // The CA of a service with a private CA, as a file the CLI and the provider read (DATAPLATFORM_CA_FILE).
    "      - name: Trust the service's CA (secret DATAPLATFORM_CA_PEM, when set)",
    "        if: env.DATAPLATFORM_CA_PEM != ''",
    '        run: |',
    '          printf \'%s\\n\' "$DATAPLATFORM_CA_PEM" > "$RUNNER_TEMP/dataplatform-ca.pem"',
    '          echo "DATAPLATFORM_CA_FILE=$RUNNER_TEMP/dataplatform-ca.pem" >> "$GITHUB_ENV"',
    ...steps.setup,
  ].join('\n');
  return `# Validate and plan on pull requests (the plan is posted as a comment), apply on main.
# Repository settings: variable DATAPLATFORM_URL; secrets DATAPLATFORM_API_KEY (an admin key of
# the project: the configuration declares the project itself, and changing its description or
# labels needs admin; a read-write key applies everything else and fails there with 403),
# DATAPLATFORM_CA_PEM (only for a private CA) and ${secretName}.
# An API key is limited to its project and cannot create it: an admin creates the project once
# (a first apply with DATAPLATFORM_EMAIL and DATAPLATFORM_PASSWORD, or in the web interface).
name: platform
on:
  pull_request:
  push:
    branches: [main]
concurrency: platform-\${{ github.ref }}
permissions:
  contents: read
  pull-requests: write
env:
  DATAPLATFORM_URL: \${{ vars.DATAPLATFORM_URL }}
  DATAPLATFORM_API_KEY: \${{ secrets.DATAPLATFORM_API_KEY }}
  DATAPLATFORM_CA_PEM: \${{ secrets.DATAPLATFORM_CA_PEM }}
  ${secretName}: \${{ secrets.${secretName} }}${o.format === 'yaml' ? '\n  # Optional: keys the secrets fingerprints (docs/security.md); the same value everywhere this config is applied.\n  DPCTL_FINGERPRINT_KEY: ${{ secrets.DPCTL_FINGERPRINT_KEY }}' : ''}
jobs:
  plan:
    if: github.event_name == 'pull_request'
    runs-on: ubuntu-latest
    steps:
${prepare}
      - name: Plan
        id: plan
        run: |
          set +e
${indent(steps.plan, 10)}
          echo "code=$code" >> "$GITHUB_OUTPUT"
          cat plan.md
      - name: Comment the plan on the pull request
        if: always() && hashFiles('plan.md') != ''
        env:
          GH_TOKEN: \${{ github.token }}
        run: gh pr comment \${{ github.event.pull_request.number }} --body-file plan.md --edit-last || gh pr comment \${{ github.event.pull_request.number }} --body-file plan.md
      - name: Fail on plan errors (exit 2 only means changes)
        run: test "\${{ steps.plan.outputs.code }}" = 0 || test "\${{ steps.plan.outputs.code }}" = 2
  apply:
    if: github.event_name == 'push'
    runs-on: ubuntu-latest
    steps:
${prepare}
      - run: ${steps.apply}
`;
}

function readme(o: ScaffoldOptions): string {
  const layout = {
    yaml: '- `platform/`: the platform as YAML documents (`dpctl validate | plan | apply platform`); your editor completes and checks them with the schema shipped in the package (`.vscode/settings.json`, and the `yaml-language-server` line of each file).',
    cdktf:
      '- `main.ts`: the platform as a CDK for Terraform app, with the constructs of `' +
      o.packageName +
      '/cdktf` (`npm run synth`, `npm run diff`, `npm run deploy`). The state is a local file until you configure a backend (`new S3Backend(...)`, ...): do that before CI applies.',
    hcl: "- `main.tf`: the platform as a Terraform configuration (`terraform init && terraform plan`). The state is a local file until you configure a backend: do that before CI applies.\n- `network-mirror.tfrc`: install the provider from the service's network mirror instead of `npx dpctl provider install`.",
  }[o.format];
  return `# ${o.repoName}

The data platform, as code. Managed with \`${o.packageName}\` (its guides: \`node_modules/${o.packageName}/README.md\` and \`docs/\`).

${layout}
- \`.github/workflows/platform.yml\`: on a pull request, validate and plan, and post the plan as a comment; on \`main\`, apply.

## Use

\`\`\`sh
npm install
export DATAPLATFORM_URL=https://<tenant host>          # e.g. https://demo.localhost:8443
export DATAPLATFORM_API_KEY=...                         # or DATAPLATFORM_EMAIL and DATAPLATFORM_PASSWORD
export DATAPLATFORM_CA_FILE=/path/to/ca.pem             # only for a private CA
${o.format === 'yaml' ? `export ORDERS_DB_PASSWORD=...\nnpx dpctl validate platform\nnpm run plan                  # dpctl plan platform ${sourceFlag(o)}\nnpm run apply` : o.format === 'cdktf' ? 'export TF_VAR_ORDERS_DB_PASSWORD=...\nnpx dpctl provider install   # the Terraform provider, into ~/.terraform.d/plugins\nnpm run synth && npm run deploy' : 'export TF_VAR_orders_db_password=...\nnpx dpctl provider install   # the Terraform provider, into ~/.terraform.d/plugins\nterraform init && terraform plan && terraform apply'}
\`\`\`

The first ${o.format === 'cdktf' ? 'deploy' : 'apply'} must create the project \`starter\`, which an API key (limited to its project) cannot:
run it once as an admin (DATAPLATFORM_EMAIL and DATAPLATFORM_PASSWORD), then CI uses an admin key of the project
(the project's own description and labels need admin; a read-write key applies the rest and fails there with 403).
Create that key once, as an admin: \`POST /api/v1/projects/<project id>/api-keys\` with
\`{"name": "ci", "permission_level": "admin"}\` answers its value, shown once (or declare it: \`node_modules/${o.packageName}/docs/resources/api_key.md\`);
store it as the repository secret \`DATAPLATFORM_API_KEY\`.

The starter connector \`orders-db\` points at \`orders.db.internal\`, a host that does not exist: put your database's host
and user there before the first ${o.format === 'cdktf' ? 'deploy' : 'apply'}${o.format === 'yaml' ? ' on `main` (the workflow applies with `--test-connections`, which fails the job on a connection that does not work)' : ''}.

${
  o.format === 'yaml'
    ? `Every plan and apply passes \`${sourceFlag(o)}\` (the package.json scripts and the workflow do): it labels what this
repository manages, and \`--prune\` deletes only resources with that label. Keep it unique per repository
and tenant; two repositories with one id would prune each other's resources.

`
    : ''
}Secrets never go into git: ${o.format === 'yaml' ? 'documents name them with `secretRef` (an environment variable or a file)' : 'they are sensitive Terraform variables'}.
A local reference service to try things against: \`npx dpctl serve --demo\`.
`;
}
