import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { closedPort, createSourceDb, eventually, waitForRun, type Run, type SourceDb } from '../runtime/helpers.js';
import { runtimeOf } from '../../../src/service/runtime/runtime.js';
import { dueSteps, firstStepAt } from '../../../src/service/runtime/escalation.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadOrCreateTls } from '../../../src/service/tls.js';
import { hashSecret } from '../../../src/service/ids.js';
import { webhookServer, validSignature } from './webhook.js';

/**
 * Alert rules fire alerts on run outcomes, channels deliver them for real (a local webhook
 * receiver), escalation follows the service clock: real time plus `offset`, which tests move.
 */
let offset = 0;
let svc: TestService;
let t: TestTenant;
let src: SourceDb;
let hook: Awaited<ReturnType<typeof webhookServer>>;
/** An HTTPS receiver (a Slack stand-in) whose certificate comes from a CA the service is told to trust. */
let slack: Awaited<ReturnType<typeof webhookServer>>;
const slackCaDir = mkdtempSync(join(tmpdir(), 'dp-slack-ca-'));
const SECRET = 'whsec-test-1';
const events: { tenantId: string; alert: any }[] = [];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  const slackTls = await loadOrCreateTls({ dataDir: slackCaDir });
  [svc, src, hook, slack] = await Promise.all([
    startTestService({
      clock: () => Date.now() + offset,
      timeScale: 1000,
      accessTokenTtl: 30 * 24 * 3600,
      outboundCaFile: slackTls.certPath,
    }),
    createSourceDb(0.1),
    webhookServer(),
    webhookServer({ tls: { cert: slackTls.cert, key: slackTls.key } }),
  ]);
  t = await svc.tenant();
  runtimeOf(svc.service.ctx).events.on('alert_update', (tenantId: string, alert: any) =>
    events.push({ tenantId, alert: structuredClone(alert) }),
  );
});
afterAll(async () => {
  await svc?.close();
  await hook?.close();
  await slack?.close();
  rmSync(slackCaDir, { recursive: true, force: true });
});

const pgConnector = (base: string, name: string, selected_tables: string[]) =>
  svc.ok(t, 'POST', `${base}/connectors`, {
    body: {
      name,
      connector_type: 'postgresql',
      config: { host: src.host, port: src.port, database: src.database, schema: 'shop', ssl_mode: 'disable' },
      credentials: { username: src.admin.username },
      selected_tables,
    },
  });
const sync = async (base: string, connectorId: string): Promise<Run> => {
  const { run_id } = await svc.ok(t, 'POST', `${base}/connectors/${connectorId}/sync`);
  return waitForRun(svc, t, `${base}/connectors/${connectorId}/runs/${run_id}`);
};
const alerts = async (base: string, query = '') => (await svc.ok<{ data: any[] }>(t, 'GET', `${base}/alerts?limit=100${query}`)).data;
const outbox = (channelId: string) =>
  svc.service.ctx.db.all<{ subject: string; recipients: string; body: string }>(
    'SELECT subject, recipients, body FROM email_outbox WHERE channel_id = ? ORDER BY seq',
    [channelId],
  );

describe('alert rules on runs', () => {
  let base: string;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    const project = await svc.project(t, 'alerting');
    base = `/projects/${project.id}`;
    ids.project = project.id;
    ids.broken = (await pgConnector(base, 'broken', ['shop.orders', 'shop.gone'])).id;
    ids.shop = (await pgConnector(base, 'shop', ['shop.orders', 'shop.customers'])).id;
    ids.hook = (
      await svc.ok(t, 'POST', `${base}/notification-channels`, {
        body: { name: 'hook', type: 'webhook', config: { url: hook.url('/alerts'), signing_secret: SECRET } },
      })
    ).id;
    const rule = (name: string, condition: object, target: object, extra: object = {}) =>
      svc.ok(t, 'POST', `${base}/alert-rules`, { body: { name, severity: 'critical', condition, target, ...extra } });
    ids.failed = (
      await rule(
        'sync failed',
        { metric: 'run_failed', operator: 'gte', threshold: 1 },
        { connector_id: ids.broken },
        { channel_ids: [ids.hook] },
      )
    ).id;
    ids.fewRows = (await rule('few rows', { metric: 'rows_synced', operator: 'lt', threshold: 10 }, { connector_id: ids.shop })).id;
    ids.manyRows = (await rule('many rows', { metric: 'rows_synced', operator: 'gt', threshold: 10 }, { connector_id: ids.shop })).id;
    ids.quick = (await rule('quick', { metric: 'run_duration_seconds', operator: 'lt', threshold: 600 }, { connector_id: ids.shop })).id;
    ids.slow = (await rule('slow', { metric: 'run_duration_seconds', operator: 'gt', threshold: 600 }, { connector_id: ids.shop })).id;
    ids.disabled = (await rule('disabled', { metric: 'run_failed', operator: 'gte', threshold: 1 }, {}, { enabled: false })).id;
  });

  it('a failed sync fires one run_failed alert, delivered to the webhook with a valid signature; a second failure does not fire again', async () => {
    const run = await sync(base, ids.broken);
    expect(run.status).toBe('failed');
    const [alert] = await eventually(async () => {
      const a = await alerts(base);
      return a.length ? a : undefined;
    });
    expect(alert).toMatchObject({
      alert_rule_id: ids.failed,
      severity: 'critical',
      status: 'firing',
      resource_id: ids.broken,
      project_id: ids.project,
    });
    expect(alert.message).toMatch(/Connector "broken": run .* failed: 1 of 2 tables failed/);
    const delivered = await eventually(async () => hook.on('/alerts')[0]);
    expect(delivered.body).toMatchObject({ type: 'alert_fired', project_id: ids.project, alert: { id: alert.id, status: 'firing' } });
    expect(typeof delivered.body.timestamp).toBe('string');
    expect(validSignature(delivered, SECRET)).toBe(true);
    expect(validSignature(delivered, 'another-secret')).toBe(false);
    expect(events.filter((e) => e.alert.id === alert.id).map((e) => [e.tenantId.length > 0, e.alert.status])).toEqual([[true, 'firing']]);

    await sync(base, ids.broken);
    await sleep(200);
    expect(await alerts(base)).toHaveLength(1);
    expect(hook.on('/alerts')).toHaveLength(1);
  });

  it('acknowledge and resolve emit alert_update after the change; a resolved alert lets the rule fire again', async () => {
    const [alert] = await alerts(base);
    await svc.ok(t, 'POST', `${base}/alerts/${alert.id}/acknowledge`, {}, 200);
    expect(events.at(-1)!.alert).toMatchObject({ id: alert.id, status: 'acknowledged' });
    await sync(base, ids.broken);
    await sleep(100);
    expect(await alerts(base)).toHaveLength(1); // acknowledged still counts as open
    await svc.ok(t, 'POST', `${base}/alerts/${alert.id}/resolve`, {}, 200);
    expect(events.at(-1)!.alert).toMatchObject({ id: alert.id, status: 'resolved', resolved_by: t.adminEmail });
    await sync(base, ids.broken);
    const again = await eventually(async () => (await alerts(base, '&status=firing'))[0]);
    expect(again.id).not.toBe(alert.id);
    await eventually(async () => hook.on('/alerts').length === 2);
  });

  it('acknowledge re-checks the credential in its transaction: a session revoked behind the service (as on another replica) cannot acknowledge, even while its reads are still answered from memory', async () => {
    await sync(base, ids.broken);
    const alert = await eventually(async () => (await alerts(base, '&status=firing'))[0]);
    const u = await svc.user(t, 'read-write');
    expect((await svc.call(t, 'GET', `${base}/alerts`, { token: u.token })).status).toBe(200);
    await svc.service.ctx.db.run('UPDATE sessions SET revoked_at = ? WHERE id = (SELECT session_id FROM access_tokens WHERE hash = ?)', [
      new Date().toISOString(),
      hashSecret(u.token),
    ]);
    const refused = await svc.call(t, 'POST', `${base}/alerts/${alert.id}/acknowledge`, { token: u.token, body: {} });
    expect(refused.status).toBe(401);
    expect(refused.body.error.message).toMatch(/revoked/);
    expect((await alerts(base, '&status=firing')).map((a: { id: string }) => a.id)).toContain(alert.id);
  });

  it('run_failed counts the failed runs of the resource within window_minutes', async () => {
    const flaky = (await pgConnector(base, 'flaky', ['shop.gone'])).id;
    const condition = { metric: 'run_failed', operator: 'gte', threshold: 3, window_minutes: 10 };
    const rule = (
      await svc.ok(t, 'POST', `${base}/alert-rules`, {
        body: { name: 'third failure', severity: 'warning', condition, target: { connector_id: flaky } },
      })
    ).id;
    const mine = async () => (await alerts(base)).filter((a) => a.alert_rule_id === rule);
    await sync(base, flaky);
    await sync(base, flaky);
    await sleep(150);
    expect(await mine()).toEqual([]);
    offset += 11 * 60_000; // both failures leave the 10-minute window
    await sync(base, flaky);
    await sync(base, flaky);
    await sleep(150);
    expect(await mine()).toEqual([]);
    await sync(base, flaky);
    const [alert] = await eventually(async () => {
      const a = await mine();
      return a.length ? a : undefined;
    });
    expect(alert.message).toMatch(/failed: .*\(3 failed runs in 10 minutes, >= 3\)$/);
  });

  it('rows_synced and run_duration_seconds rules compare with their operator and threshold', async () => {
    const run = await sync(base, ids.shop);
    expect(run.status).toBe('succeeded');
    await eventually(async () => (await alerts(base)).filter((a) => a.resource_id === ids.shop).length >= 2);
    await sleep(100);
    const fired = (await alerts(base)).filter((a) => a.resource_id === ids.shop);
    expect(fired.map((a) => a.alert_rule_id).sort()).toEqual([ids.fewRows, ids.quick].sort());
    expect(fired.find((a) => a.alert_rule_id === ids.fewRows).message).toMatch(/synced 5 rows \(< 10\)/);
    expect((await alerts(base)).some((a) => a.alert_rule_id === ids.disabled)).toBe(false);
  });
});

describe('notification channels', () => {
  let base: string;
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    base = `/projects/${(await svc.project(t, 'channels')).id}`;
    ids.hook = (
      await svc.ok(t, 'POST', `${base}/notification-channels`, {
        body: { name: 'hook', type: 'webhook', config: { url: hook.url('/test'), signing_secret: SECRET } },
      })
    ).id;
    ids.closed = (
      await svc.ok(t, 'POST', `${base}/notification-channels`, {
        body: { name: 'closed', type: 'webhook', config: { url: `http://127.0.0.1:${await closedPort()}/hook` } },
      })
    ).id;
    ids.mail = (
      await svc.ok(t, 'POST', `${base}/notification-channels`, {
        body: { name: 'mail', type: 'email', config: { email_addresses: ['ops@example.com', 'oncall@example.com'] } },
      })
    ).id;
  });

  it('POST .../test delivers a signed test event and answers success with the status code', async () => {
    const res = await svc.call(t, 'POST', `${base}/notification-channels/${ids.hook}/test`);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ success: true, status_code: 200 });
    const got = hook.on('/test').at(-1)!;
    expect(got.body.type).toBe('test');
    expect(validSignature(got, SECRET)).toBe(true);
  });

  it('retries a webhook that answers 500, and records the attempts', async () => {
    hook.state.failNext = 2;
    const before = hook.on('/test').length;
    const res = await svc.call(t, 'POST', `${base}/notification-channels/${ids.hook}/test`);
    expect(res.body).toMatchObject({ success: true, status_code: 200 });
    expect(hook.on('/test').length - before).toBe(3);
    const deliveries = (await svc.ok(t, 'GET', `${base}/notification-channels/${ids.hook}/deliveries`)).data;
    expect(deliveries.at(-1)).toMatchObject({ event_type: 'test', status: 'delivered', status_code: 200, attempts: 3 });
  });

  it('a closed port is still 200, success false with the reason', async () => {
    const res = await svc.call(t, 'POST', `${base}/notification-channels/${ids.closed}/test`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.success).toBe(false);
    expect(res.body.message).toMatch(/ECONNREFUSED/);
    const deliveries = (await svc.ok(t, 'GET', `${base}/notification-channels/${ids.closed}/deliveries`)).data;
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]).toMatchObject({ status: 'failed', attempts: 3 });
  });

  it('slack: POSTs {text, channel, event} over HTTPS to the write-only webhook URL, trusting --outbound-ca-file', async () => {
    const url = slack.url('/services/T000/B000/XXXX');
    const channel = (
      await svc.ok(t, 'POST', `${base}/notification-channels`, {
        body: { name: 'slack', type: 'slack', config: { slack_webhook_url: url, slack_channel: '#data-alerts' } },
      })
    ).id;
    expect(JSON.stringify(await svc.ok(t, 'GET', `${base}/notification-channels/${channel}`))).not.toContain('/services/T000');
    const res = await svc.call(t, 'POST', `${base}/notification-channels/${channel}/test`);
    expect(res.body).toMatchObject({ success: true, status_code: 200 });
    const [got] = slack.on('/services/T000/B000/XXXX');
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.body).toMatchObject({ text: 'Test notification from the data platform', channel: '#data-alerts', event: { type: 'test' } });
  });

  it('an HTTPS receiver whose CA is not trusted fails the delivery with the TLS reason', async () => {
    const other = await startTestService();
    try {
      const tenant = await other.tenant();
      const project = await other.project(tenant, 'untrusted');
      const channel = (
        await other.ok(tenant, 'POST', `/projects/${project.id}/notification-channels`, {
          body: { name: 'slack', type: 'slack', config: { slack_webhook_url: slack.url('/untrusted') } },
        })
      ).id;
      const res = await other.call(tenant, 'POST', `/projects/${project.id}/notification-channels/${channel}/test`);
      expect(res.body.success).toBe(false);
      expect(res.body.message).toMatch(/certificate|self.signed|UNABLE_TO_VERIFY/i);
      expect(slack.on('/untrusted')).toEqual([]);
    } finally {
      await other.close();
    }
  });

  it('email is written to the outbox', async () => {
    const res = await svc.call(t, 'POST', `${base}/notification-channels/${ids.mail}/test`);
    expect(res.body).toMatchObject({ success: true });
    const mails = await outbox(ids.mail);
    expect(mails).toHaveLength(1);
    expect(JSON.parse(mails[0].recipients)).toEqual(['ops@example.com', 'oncall@example.com']);
    expect(JSON.parse(mails[0].body).type).toBe('test');
  });

  it('the test is audited and needs read-write', async () => {
    const logs = (await svc.ok(t, 'GET', '/audit-logs?limit=100')).data as any[];
    expect(logs.some((l) => l.action === 'notification_channel.test')).toBe(true);
    const projectId = base.split('/')[2];
    const ro = await svc.apiKey(t, projectId, 'read-only');
    const res = await svc.call(t, 'POST', `${base}/notification-channels/${ids.mail}/test`, { token: ro.key });
    expect(res.status).toBe(403);
  });

  it('a pipeline notification step sends through its channel, and fails when delivery fails', async () => {
    const pipeline = async (name: string, channel_id: string) => {
      const p = await svc.ok(t, 'POST', `${base}/pipelines`, {
        body: { name, steps: [{ name: 'tell', type: 'notification', channel_id }] },
      });
      const { run_id } = await svc.ok(t, 'POST', `${base}/pipelines/${p.id}/run`);
      return waitForRun(svc, t, `${base}/pipelines/${p.id}/runs/${run_id}`);
    };
    const ok = await pipeline('tell-hook', ids.hook);
    expect(ok.status).toBe('succeeded');
    expect(hook.on('/test').at(-1)!.body).toMatchObject({ type: 'pipeline_notification', run_id: ok.id, step_name: 'tell' });
    const bad = await pipeline('tell-closed', ids.closed);
    expect(bad.status).toBe('failed');
    expect(bad.steps[0].error).toMatch(/notification to "closed" failed: .*ECONNREFUSED/);
  });
});

describe('escalation and freshness (service clock)', () => {
  let base: string;
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    base = `/projects/${(await svc.project(t, 'escalation')).id}`;
    ids.broken = (await pgConnector(base, 'broken', ['shop.gone'])).id;
    ids.broken2 = (await pgConnector(base, 'broken2', ['shop.gone'])).id;
    ids.page = (
      await svc.ok(t, 'POST', `${base}/notification-channels`, {
        body: { name: 'page', type: 'webhook', config: { url: hook.url('/page') } },
      })
    ).id;
    ids.mail = (
      await svc.ok(t, 'POST', `${base}/notification-channels`, {
        body: { name: 'boss', type: 'email', config: { email_addresses: ['boss@example.com'] } },
      })
    ).id;
    ids.policy = (
      await svc.ok(t, 'POST', `${base}/escalation-policies`, {
        body: {
          name: 'oncall',
          steps: [
            { delay_minutes: 5, channel_ids: [ids.page] },
            { delay_minutes: 15, channel_ids: [ids.mail] },
          ],
        },
      })
    ).id;
    await svc.ok(t, 'POST', `${base}/alert-rules`, {
      body: {
        name: 'failed',
        severity: 'warning',
        condition: { metric: 'run_failed', operator: 'gte', threshold: 1 },
        escalation_policy_id: ids.policy,
      },
    });
  });

  it('computes due steps per round (repeat)', () => {
    const policy = {
      steps: [
        { delay_minutes: 0, channel_ids: ['a'] },
        { delay_minutes: 10, channel_ids: ['b'] },
      ],
      repeat: 1,
    };
    expect(dueSteps(policy, 0, 9 * 60_000).map((s) => s.key)).toEqual(['0:0']);
    expect(dueSteps(policy, 0, 10 * 60_000).map((s) => s.key)).toEqual(['0:0', '0:1', '1:0']);
    expect(dueSteps(policy, 0, 99 * 60_000).map((s) => s.key)).toEqual(['0:0', '0:1', '1:0', '1:1']);
    // A new alert's escalation row is first due at the earliest step, whatever the steps' order.
    expect(firstStepAt(policy, 1_000)).toBe(1_000);
    expect(
      firstStepAt(
        {
          steps: [
            { delay_minutes: 30, channel_ids: [] },
            { delay_minutes: 5, channel_ids: [] },
          ],
          repeat: 3,
        },
        0,
      ),
    ).toBe(5 * 60_000);
    expect(firstStepAt({ steps: [] }, 0)).toBeUndefined();
  });

  it('notifies each step once after its delay while firing; acknowledging stops it', async () => {
    await sync(base, ids.broken);
    await sync(base, ids.broken2);
    const fired = await eventually(async () => {
      const a = await alerts(base);
      return a.length === 2 ? a : undefined;
    });
    const first = fired.find((a) => a.resource_id === ids.broken);
    const second = fired.find((a) => a.resource_id === ids.broken2);
    await sleep(150);
    expect(hook.on('/page')).toHaveLength(0);

    offset += 6 * 60_000;
    await eventually(async () => hook.on('/page').length === 2);
    await sleep(150);
    expect(hook.on('/page')).toHaveLength(2);
    expect(hook.on('/page').map((r) => r.body.type)).toEqual(['alert_escalated', 'alert_escalated']);
    expect(await outbox(ids.mail)).toHaveLength(0);

    await svc.ok(t, 'POST', `${base}/alerts/${first.id}/acknowledge`, {}, 200);
    offset += 10 * 60_000;
    const mails = await eventually(async () => {
      const m = await outbox(ids.mail);
      return m.length ? m : undefined;
    });
    await sleep(150);
    expect(await outbox(ids.mail)).toHaveLength(1);
    expect(JSON.parse(mails[0].body).alert.id).toBe(second.id);
    expect(hook.on('/page')).toHaveLength(2);
  });

  it('freshness_minutes fires when a connector has not synced within the threshold', async () => {
    const p = `/projects/${(await svc.project(t, 'freshness')).id}`;
    const crm = (
      await svc.ok(t, 'POST', `${p}/connectors`, { body: { name: 'crm', connector_type: 'salesforce', selected_tables: ['Account'] } })
    ).id;
    await sync(p, crm);
    await svc.ok(t, 'POST', `${p}/alert-rules`, {
      body: {
        name: 'stale',
        severity: 'info',
        condition: { metric: 'freshness_minutes', operator: 'gt', threshold: 30 },
        target: { connector_id: crm },
      },
    });
    await sleep(150);
    expect(await alerts(p)).toHaveLength(0);
    offset += 31 * 60_000;
    const [alert] = await eventually(async () => {
      const a = await alerts(p);
      return a.length ? a : undefined;
    });
    expect(alert).toMatchObject({ severity: 'info', status: 'firing', resource_id: crm });
    expect(alert.message).toMatch(/Connector "crm" last synced 3\d minutes ago \(> 30 minutes\)/);
    await sleep(150);
    expect(await alerts(p)).toHaveLength(1);
  });
});

describe('classified columns in the discovered schema', () => {
  it('marks columns matched by a classification with the masking method of its enabled policy', async () => {
    const base = `/projects/${(await svc.project(t, 'governance')).id}`;
    const shop = (await pgConnector(base, 'shop', ['shop.orders', 'shop.customers'])).id;
    const pii = (
      await svc.ok(t, 'POST', `${base}/classifications`, {
        body: { name: 'pii', sensitivity: 'restricted', column_matchers: [{ column_pattern: '^EMAIL$', table_pattern: 'customers' }] },
      })
    ).id;
    const money = (
      await svc.ok(t, 'POST', `${base}/classifications`, {
        body: {
          name: 'money',
          sensitivity: 'confidential',
          column_matchers: [
            { column_pattern: 'amount', data_type: 'numeric' },
            { column_pattern: 'note', data_type: 'integer' },
          ],
        },
      })
    ).id;
    await svc.ok(t, 'POST', `${base}/masking-policies`, { body: { name: 'hash-pii', classification_id: pii, method: 'hash' } });
    await svc.ok(t, 'POST', `${base}/masking-policies`, {
      body: { name: 'off', classification_id: money, method: 'redact', enabled: false },
    });
    const schema = await svc.ok(t, 'GET', `${base}/connectors/${shop}/schema`);
    const col = (table: string, name: string) => schema.tables.find((x: any) => x.name === table).columns.find((c: any) => c.name === name);
    expect(col('customers', 'email')).toMatchObject({
      classification: 'pii',
      classification_id: pii,
      sensitivity: 'restricted',
      masking: 'hash',
    });
    expect(col('orders', 'amount')).toMatchObject({ classification: 'money', sensitivity: 'confidential', masking: null });
    expect(col('orders', 'note').classification).toBeUndefined();
    expect(col('orders', 'id')).toEqual({ name: 'id', type: 'bigint', nullable: false });
  });
});
