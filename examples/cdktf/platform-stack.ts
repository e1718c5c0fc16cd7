/**
 * A realistic platform written with the construct library: a commerce project whose orders
 * and billing databases are synced, modelled with dbt and published every night, with alerting,
 * on-call escalation and masking of personal data. Secrets come from Terraform variables.
 */
import { TerraformOutput, TerraformStack } from 'cdktf';
import type { Construct } from 'constructs';
import { Classification, EscalationPolicy, MaskingPolicy, Platform, secret, step } from 'dataplatform-as-code/cdktf';

export class PlatformStack extends TerraformStack {
  constructor(scope: Construct, id: string) {
    super(scope, id);
    // The provider reads DATAPLATFORM_URL, DATAPLATFORM_API_KEY (or _EMAIL/_PASSWORD) and DATAPLATFORM_CA_FILE.
    const platform = new Platform(this, 'platform');
    const commerce = platform.addProject('commerce', { description: 'Orders, billing and the revenue models.', labels: { owner: 'data-platform' } });

    const orders = commerce.addConnector('orders-db', {
      connectorType: 'postgresql',
      config: { host: 'orders.db.internal', port: 5432, database: 'orders', schema: 'public', sslMode: 'verify-full' },
      // TF_VAR_ORDERS_DB_PASSWORD; never written to cdktf.out.
      credentials: { username: 'replicator', password: secret(this, 'ORDERS_DB_PASSWORD', { description: 'Password of the orders database replica user.' }) },
      selectedTables: ['public.orders', 'public.order_items', 'public.customers'],
      schedule: '0 * * * *',
      labels: { tier: 'critical' },
    });
    const billing = commerce.addConnector('billing-db', {
      connectorType: 'mysql',
      config: { host: 'billing.db.internal', port: 3306, database: 'billing', sslMode: 'require' },
      credentials: { username: 'readonly', password: secret(this, 'BILLING_DB_PASSWORD') },
      selectedTables: ['invoices', 'payments'],
    });

    const slack = commerce.addNotificationChannel('data-team-slack', {
      type: 'slack',
      config: { slackWebhookUrl: secret(this, 'SLACK_WEBHOOK_URL'), slackChannel: '#data-alerts' },
    });
    const leads = commerce.addNotificationChannel('data-leads-email', { type: 'email', config: { emailAddresses: ['data-leads@example.com'] } });

    const models = commerce.addDbtProject('warehouse-models', {
      repository: 'https://git.example.com/data/warehouse-models.git',
      branch: 'main',
      models: [
        { name: 'stg_orders', materialization: 'view', sources: [{ connectorId: orders.id, table: 'public.orders' }] },
        { name: 'stg_invoices', sources: [{ connectorId: billing.id, table: 'invoices' }] },
        { name: 'fct_revenue', materialization: 'incremental', dependsOn: ['stg_orders', 'stg_invoices'] },
      ],
    });

    // Steps name the constructs they run; ids and step types follow from them.
    const syncOrders = step('sync-orders', orders);
    const syncBilling = step('sync-billing', billing);
    const build = step('build-models', models, { after: [syncOrders, syncBilling] });
    const nightly = commerce.addPipeline('nightly-revenue', {
      description: 'Sync the sources, rebuild the models, tell the team.',
      schedule: '0 2 * * *',
      steps: [syncOrders, syncBilling, build, step('announce', slack, { after: [build] })],
    });

    const escalation = commerce.add(EscalationPolicy, 'revenue-escalation', {
      description: 'Slack first, then the leads if nobody acknowledges.',
      steps: [
        { delayMinutes: 0, channelIds: [slack.id] },
        { delayMinutes: 30, channelIds: [leads.id] },
      ],
    });
    commerce.addAlertRule('revenue-pipeline-failed', {
      severity: 'critical',
      condition: { metric: 'run_failed', operator: 'gte', threshold: 1, windowMinutes: 60 },
      target: { pipelineId: nightly.id },
      channelIds: [slack.id],
      escalationPolicyId: escalation.id,
    });

    const pii = commerce.add(Classification, 'pii-email', {
      sensitivity: 'confidential',
      columnMatchers: [{ columnPattern: '^(customer_)?email(_address)?$' }],
    });
    commerce.add(MaskingPolicy, 'hash-emails', { classificationId: pii.id, method: 'hash', exemptRoles: ['admin'] });

    new TerraformOutput(this, 'project_id', { value: commerce.id });
    new TerraformOutput(this, 'pipeline_id', { value: nightly.id });
  }
}
