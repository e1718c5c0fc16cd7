import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkSmtpUrl, redactedSmtpUrl } from '../../../src/service/smtp-url.js';
import { loadOrCreateTls } from '../../../src/service/tls.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { smtpReceiver } from './smtp-receiver.js';

/**
 * Email channels with `--smtp-url`: delivered to a real SMTP server running in the test, over
 * STARTTLS with a certificate of a CA the service trusts through `--outbound-ca-file`, with
 * authentication. Without `--smtp-url` the outbox is the delivery (alerting.test.ts).
 */
const caDir = mkdtempSync(join(tmpdir(), 'dp-smtp-ca-'));
const AUTH = { user: 'alerts', pass: 'smtp-secret-1' };
let svc: TestService;
let t: TestTenant;
let smtp: Awaited<ReturnType<typeof smtpReceiver>>;
let base: string;

const emailChannel = async (service: TestService, tenant: TestTenant, projectBase: string, name: string, email_addresses: string[]) =>
  (await service.ok(tenant, 'POST', `${projectBase}/notification-channels`, { body: { name, type: 'email', config: { email_addresses } } }))
    .id as string;
const test = (service: TestService, tenant: TestTenant, projectBase: string, channelId: string) =>
  service.call(tenant, 'POST', `${projectBase}/notification-channels/${channelId}/test`);
const deliveries = async (channelId: string) =>
  (await svc.ok(t, 'GET', `${base}/notification-channels/${channelId}/deliveries`)).data as any[];
const outbox = () => svc.service.ctx.db.all('SELECT id FROM email_outbox');

beforeAll(async () => {
  const tls = await loadOrCreateTls({ dataDir: caDir });
  smtp = await smtpReceiver({ tls: { cert: tls.cert, key: tls.key }, auth: AUTH });
  svc = await startTestService({
    smtpUrl: `smtp://${AUTH.user}:${AUTH.pass}@127.0.0.1:${smtp.port}`,
    smtpFrom: 'Platform Alerts <alerts@acme.test>',
    outboundCaFile: tls.certPath,
    timeScale: 1000,
  });
  t = await svc.tenant();
  base = `/projects/${(await svc.project(t, 'mail')).id}`;
});
afterAll(async () => {
  await svc?.close();
  await smtp?.close();
  rmSync(caDir, { recursive: true, force: true });
});

describe('email channels through SMTP', () => {
  it('sends the test notification over STARTTLS with authentication: recipients, sender, subject, the event as JSON; nothing goes to the outbox', async () => {
    const channel = await emailChannel(svc, t, base, 'oncall', ['ops@example.com', 'oncall@example.com']);
    const res = await test(svc, t, base, channel);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ success: true, status_code: 250 });
    expect(res.body.message).toMatch(/^Sent by SMTP via 127\.0\.0\.1:\d+ to ops@example\.com, oncall@example\.com: 250/);
    expect(smtp.received).toHaveLength(1);
    const [mail] = smtp.received;
    expect(mail).toMatchObject({
      to: ['ops@example.com', 'oncall@example.com'],
      from: 'alerts@acme.test',
      user: AUTH.user,
      subject: 'Test notification from the data platform',
    });
    expect(JSON.parse(mail.text)).toMatchObject({ type: 'test', project_id: base.split('/')[2] });
    expect(await outbox()).toEqual([]);
    expect((await deliveries(channel)).at(-1)).toMatchObject({ event_type: 'test', status: 'delivered', status_code: 250, attempts: 1 });
  });

  it('retries a "try again later" (4xx) reply, and records the attempts', async () => {
    const channel = await emailChannel(svc, t, base, 'busy', ['data@example.com']);
    smtp.state.refuseNext = [
      { code: 451, message: 'Greylisted, try again later' },
      { code: 421, message: 'Too busy' },
    ];
    const before = smtp.received.length;
    const res = await test(svc, t, base, channel);
    expect(res.body).toMatchObject({ success: true, status_code: 250 });
    expect(smtp.received.length - before).toBe(1);
    expect((await deliveries(channel)).at(-1)).toMatchObject({ status: 'delivered', attempts: 3 });
  });

  it("a permanent (5xx) refusal fails at once with the server's reply", async () => {
    const channel = await emailChannel(svc, t, base, 'gone', ['nobody@example.com']);
    smtp.state.refuseNext = [{ code: 550, message: 'No such mailbox' }];
    const res = await test(svc, t, base, channel);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: false, status_code: 550 });
    expect(res.body.message).toMatch(/550.*No such mailbox/);
    expect((await deliveries(channel)).at(-1)).toMatchObject({ status: 'failed', status_code: 550, attempts: 1 });
  });

  it('wrong credentials and an untrusted certificate fail the delivery with the reason, never leaking the password', async () => {
    const [wrongPassword, untrusted] = await Promise.all([
      startTestService({
        smtpUrl: `smtp://${AUTH.user}:not-the-password@127.0.0.1:${smtp.port}`,
        outboundCaFile: svc.service.ctx.options.outboundCaFile,
        timeScale: 1000,
      }),
      startTestService({ smtpUrl: `smtp://${AUTH.user}:${AUTH.pass}@127.0.0.1:${smtp.port}`, timeScale: 1000 }),
    ]);
    try {
      for (const [service, reason] of [
        [wrongPassword, /535|auth/i],
        [untrusted, /certificate|self.signed|UNABLE_TO_VERIFY/i],
      ] as const) {
        const tenant = await service.tenant();
        const projectBase = `/projects/${(await service.project(tenant, 'mail')).id}`;
        const channel = await emailChannel(service, tenant, projectBase, 'ops', ['ops@example.com']);
        const before = smtp.received.length;
        const res = await test(service, tenant, projectBase, channel);
        expect(res.body.success).toBe(false);
        expect(res.body.message).toMatch(reason);
        expect(res.body.message).not.toContain('not-the-password');
        expect(smtp.received.length).toBe(before);
      }
    } finally {
      await Promise.all([wrongPassword.close(), untrusted.close()]);
    }
  });
});

describe('--smtp-url', () => {
  it('takes smtp:// and smtps:// URLs with a host, and names the flag otherwise without echoing a password', () => {
    expect(checkSmtpUrl('smtps://mail.example.com', '--smtp-url')).toBe('smtps://mail.example.com');
    expect(() => checkSmtpUrl('https://u:hunter2@mail.example.com', 'DP_SMTP_URL')).toThrow(
      /^DP_SMTP_URL must start with smtp:\/\/ or smtps:\/\//,
    );
    expect(() => checkSmtpUrl('mail.example.com:25', '--smtp-url')).toThrow(/--smtp-url/);
    expect(() => checkSmtpUrl('hunter2', '--smtp-url')).toThrow(/^--smtp-url is not a URL/);
    try {
      checkSmtpUrl('http://u:hunter2@x', '--smtp-url');
    } catch (err) {
      expect((err as Error).message).not.toContain('hunter2');
    }
    expect(redactedSmtpUrl('smtp://alerts:hunter2@mail.example.com:587')).toBe('smtp://alerts:***@mail.example.com:587');
  });
});
