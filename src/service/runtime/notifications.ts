import { createHmac } from 'node:crypto';
import pRetry, { AbortError } from 'p-retry';
import { fetch } from 'undici';
import { outboundAgent } from '../outbound.js';
import { EgressDenied, egressPolicy } from '../egress.js';
import type { StoredResource } from '../store/resources.js';
import { overRange, scopeRange } from '../store/keyset.js';
import { newId } from '../ids.js';
import { REQUEST_TIMEOUT_MS, retryOptions, type DeliveryResult } from './delivery-policy.js';
import { sendMail } from './smtp.js';
import type { Runtime } from './runtime.js';

/**
 * Delivery of notifications to channels (schemas/kinds/notification_channel.schema.json):
 *
 * - webhook: POST of the JSON event to config.url; with a signing_secret, the header
 *   `X-Dataplatform-Signature: sha256=<hex HMAC-SHA256 of the exact body bytes>`.
 * - slack: POST `{text, channel?, event}` to the (write-only) slack_webhook_url.
 * - email: sent through the SMTP server of `--smtp-url` (smtp.ts); without one, written to the
 *   `email_outbox` table, which is then the delivery.
 *
 * HTTP deliveries are retried (p-retry) on network errors, timeouts, 429 and 5xx, with an
 * exponential backoff (delivery-policy.ts), each attempt bounded by REQUEST_TIMEOUT_MS. Every
 * delivery, successful or not, is a row of `notification_deliveries`; channels are read and rows
 * written a group at a time (notification-rows.ts). HTTPS trusts the system
 * CAs plus `--outbound-ca-file`, for receivers behind a private CA or a TLS-inspecting proxy.
 * Every connection goes through the egress policy (egress.ts): a refused receiver is a failed
 * delivery, not retried.
 */

export interface NotificationEvent {
  /** alert_fired, alert_escalated, test, pipeline_notification */
  type: string;
  project_id: string;
  timestamp: string;
  alert?: Record<string, unknown>;
  [key: string]: unknown;
}

export interface DeliveryRecord {
  id: string;
  channel_id: string;
  event_type: string;
  alert_id: string | null;
  status: 'delivered' | 'failed' | 'skipped';
  status_code: number | null;
  attempts: number;
  message: string;
  created_at: string;
}

class HttpFailure extends Error {
  constructor(
    message: string,
    readonly statusCode?: number,
  ) {
    super(message);
  }
}

const secretsOf = (channel: StoredResource) => ((channel.secrets ?? {}).config ?? {}) as Record<string, unknown>;
const configOf = (channel: StoredResource) => (channel.data.config ?? {}) as Record<string, unknown>;

/** One text line for humans (Slack, email subject). */
export function summary(event: NotificationEvent): string {
  const alert = event.alert;
  if (alert) return `[${String(alert.severity).toUpperCase()}] ${alert.status === 'firing' ? '' : `(${alert.status}) `}${alert.message}`;
  if (event.type === 'test') return 'Test notification from the data platform';
  return String(event.message ?? event.type);
}

/**
 * The most of a receiver's reply that is read, then dropped: the status is the answer, and the
 * body is read only so that a short one leaves the connection reusable. Reading a reply whole let
 * a tenant's receiver send gigabytes (or a small gzip bomb) into the service's memory.
 */
export const REPLY_BYTES_READ = 64 * 1024;

/** Reads at most REPLY_BYTES_READ of the reply, and cancels the rest (the connection is then closed). */
async function dropReply(body: AsyncIterable<Uint8Array> | null): Promise<void> {
  if (!body) return;
  let read = 0;
  try {
    for await (const chunk of body) {
      read += chunk.byteLength;
      if (read > REPLY_BYTES_READ) break; // leaving the loop cancels the stream
    }
  } catch {
    // A reply cut off (a reset, the timeout) after its status: the status still counts.
  }
}

/** POSTs JSON with retries; resolves to the final answer, or throws HttpFailure after the last attempt. */
async function postJson(
  rt: Runtime,
  url: string,
  body: string,
  headers: Record<string, string>,
): Promise<{ status: number; attempts: number }> {
  let attempts = 0;
  const result = await pRetry(async () => {
    attempts++;
    let res: Awaited<ReturnType<typeof fetch>>;
    try {
      res = await fetch(url, {
        method: 'POST',
        body,
        // identity: a compressed reply is not inflated (the part read is bounded all the same).
        headers: { 'content-type': 'application/json', 'accept-encoding': 'identity', 'user-agent': 'dataplatform-notifier/1', ...headers },
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        redirect: 'manual',
        dispatcher: outboundAgent(egressPolicy(rt.ctx.options), { caFile: rt.ctx.options.outboundCaFile }),
      });
    } catch (err) {
      const e = err as Error & { cause?: { code?: string; message?: string } };
      // The egress policy's refusal will not change on a retry: reported as it is, once.
      if (e.cause instanceof EgressDenied) throw new AbortError(new HttpFailure(e.cause.message));
      const reason =
        e.name === 'TimeoutError' ? `no answer within ${REQUEST_TIMEOUT_MS / 1000} s` : (e.cause?.code ?? e.cause?.message ?? e.message);
      throw new HttpFailure(`request to ${new URL(url).host} failed: ${reason}`);
    }
    await dropReply(res.body);
    if (res.status >= 200 && res.status < 300) return res.status;
    const failure = new HttpFailure(`${new URL(url).host} answered HTTP ${res.status}`, res.status);
    if (res.status === 429 || res.status >= 500) throw failure;
    throw new AbortError(failure);
  }, retryOptions(rt)).catch((err: unknown) => {
    const failure = err instanceof HttpFailure ? err : ((err as { originalError?: unknown }).originalError ?? err);
    if (failure instanceof HttpFailure) throw Object.assign(failure, { attempts });
    throw Object.assign(new HttpFailure(String((failure as Error)?.message ?? failure)), { attempts });
  });
  return { status: result, attempts };
}

/** Sends one event to one channel and records the delivery. Never throws for a failed delivery. */
export async function deliver(rt: Runtime, channel: StoredResource, event: NotificationEvent): Promise<DeliveryResult> {
  let result: DeliveryResult;
  try {
    // Past the tenant's deliveries waiting (Runtime.deliveries), this one is recorded failed with the reason.
    // The email outbox is a database write, with no socket to bound: not gated, so a burst of escalation
    // emails (3,000 alerts of one tenant) is not refused past the gate's 1,000 waiting.
    result = opensSocket(rt, channel)
      ? await rt.deliveries.run(channel.tenantId, () => send(rt, channel, event))
      : await send(rt, channel, event);
  } catch (err) {
    const e = err as HttpFailure & { attempts?: number };
    result = { success: false, message: e.message, ...(e.statusCode ? { status_code: e.statusCode } : {}), attempts: e.attempts ?? 1 };
  }
  await record(rt, channel, event, result.success ? 'delivered' : 'failed', result).catch((err) =>
    rt.log?.error({ err }, 'recording a notification delivery failed'),
  );
  if (!result.success) rt.log?.info({ channelId: channel.id, type: event.type, message: result.message }, 'notification delivery failed');
  return result;
}

/** Whether delivering to the channel connects somewhere (HTTP, SMTP), rather than writing the email outbox. */
const opensSocket = (rt: Runtime, channel: StoredResource) => channel.data.type !== 'email' || Boolean(rt.ctx.options.smtpUrl);

async function send(rt: Runtime, channel: StoredResource, event: NotificationEvent): Promise<DeliveryResult> {
  const config = configOf(channel);
  const secrets = secretsOf(channel);
  const type = String(channel.data.type);
  if (type === 'webhook') {
    const url = String(config.url ?? '');
    if (!url) return { success: false, message: 'config.url is not set', attempts: 0 };
    const body = JSON.stringify(event);
    const headers: Record<string, string> = { 'x-dataplatform-event': event.type };
    const secret = secrets.signing_secret ?? config.signing_secret;
    if (typeof secret === 'string' && secret)
      headers['x-dataplatform-signature'] = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
    const { status, attempts } = await postJson(rt, url, body, headers);
    return { success: true, message: `Delivered to ${new URL(url).host}: HTTP ${status}`, status_code: status, attempts };
  }
  if (type === 'slack') {
    const url = String(secrets.slack_webhook_url ?? config.slack_webhook_url ?? '');
    if (!url) return { success: false, message: 'config.slack_webhook_url is not set', attempts: 0 };
    const body = JSON.stringify({ text: summary(event), ...(config.slack_channel ? { channel: config.slack_channel } : {}), event });
    const { status, attempts } = await postJson(rt, url, body, {});
    return { success: true, message: `Delivered to Slack: HTTP ${status}`, status_code: status, attempts };
  }
  if (type === 'email') {
    const recipients = (config.email_addresses as string[] | undefined) ?? [];
    if (!recipients.length) return { success: false, message: 'config.email_addresses is empty', attempts: 0 };
    const mail = { to: recipients, subject: summary(event), text: JSON.stringify(event, null, 2) };
    if (rt.ctx.options.smtpUrl) return sendMail(rt, mail);
    await rt.notificationRows.queueEmail({
      id: newId('eml'),
      tenant_id: channel.tenantId,
      project_id: channel.projectId,
      channel_id: channel.id,
      recipients: JSON.stringify(recipients),
      subject: mail.subject,
      body: mail.text,
      created_at: rt.now(),
    });
    return {
      success: true,
      message: `Queued in the email outbox for ${recipients.join(', ')} (no SMTP configured: the outbox is the delivery)`,
      attempts: 1,
    };
  }
  return { success: false, message: `unknown channel type ${type}`, attempts: 0 };
}

async function record(
  rt: Runtime,
  channel: StoredResource,
  event: NotificationEvent,
  status: DeliveryRecord['status'],
  result: DeliveryResult,
): Promise<void> {
  await rt.notificationRows.record({
    id: newId('dlv'),
    tenant_id: channel.tenantId,
    project_id: channel.projectId,
    channel_id: channel.id,
    event_type: event.type,
    alert_id: (event.alert?.id as string | undefined) ?? null,
    status,
    status_code: result.status_code ?? null,
    attempts: result.attempts,
    message: result.message,
    created_at: rt.now(),
  });
}

/** Deliveries of a channel, oldest first, after `afterSeq`. */
export async function listDeliveries(
  rt: Runtime,
  tenantId: string,
  channelId: string,
  afterSeq: number,
  limit: number,
): Promise<(DeliveryRecord & { seq: number })[]> {
  // The channel's own index range, whatever the plan (store/keyset.ts).
  const range = scopeRange(
    rt.ctx.db,
    [
      ['tenant_id', tenantId],
      ['channel_id', channelId],
    ],
    { after: { value: afterSeq } },
  );
  const rows = await rt.ctx.db.all<Record<string, unknown>>(
    overRange(
      range,
      `SELECT seq, id, channel_id, event_type, alert_id, status, status_code, attempts, message, created_at FROM notification_deliveries WHERE ${range.sql} ORDER BY ${range.order} LIMIT ?`,
    ),
    [...range.params, limit],
  );
  return rows.map((r) => ({
    seq: Number(r.seq),
    id: String(r.id),
    channel_id: String(r.channel_id),
    event_type: String(r.event_type),
    alert_id: (r.alert_id as string | null) ?? null,
    status: r.status as DeliveryRecord['status'],
    status_code: r.status_code == null ? null : Number(r.status_code),
    attempts: Number(r.attempts),
    message: String(r.message),
    created_at: String(r.created_at),
  }));
}
