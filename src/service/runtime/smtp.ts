import nodemailer, { type Transporter } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport/index.js';
import pRetry, { AbortError } from 'p-retry';
import { outboundCas } from '../outbound.js';
import { EgressDenied, egressPolicy } from '../egress.js';
import { REQUEST_TIMEOUT_MS, retryOptions, type DeliveryResult } from './delivery-policy.js';
import type { Runtime } from './runtime.js';

/**
 * Email channels over SMTP, when the service has `--smtp-url` (or DP_SMTP_URL):
 * `smtp://[user:password@]host[:port]` (STARTTLS when the server offers it) or `smtps://...`
 * (TLS from the start). The server's certificate is checked against the system CAs plus
 * `--outbound-ca-file`. Each step of the conversation is bounded by REQUEST_TIMEOUT_MS, and
 * failures that may pass (no connection, a timeout, a 4xx "try again later" reply) are retried
 * like HTTP deliveries; a 5xx reply (unknown mailbox, refused sender) is final.
 */

export interface Mail {
  to: string[];
  subject: string;
  text: string;
}

/** What nodemailer's errors carry. */
interface SmtpError extends Error {
  code?: string;
  responseCode?: number;
  response?: string;
}

class MailFailure extends Error {
  constructor(
    message: string,
    readonly statusCode?: number,
  ) {
    super(message);
  }
}

// One transport per service (it reads the CA file once); without `pool` it opens a connection
// per mail and holds none between them, so it never needs closing.
type SmtpTransporter = Transporter<SMTPTransport.SentMessageInfo>;
const transports = new WeakMap<Runtime['ctx'], SmtpTransporter>();

function transport(rt: Runtime): SmtpTransporter {
  let smtp = transports.get(rt.ctx);
  if (smtp) return smtp;
  const ca = outboundCas({ caFile: rt.ctx.options.outboundCaFile });
  const egress = egressPolicy(rt.ctx.options);
  smtp = nodemailer.createTransport({
    url: rt.ctx.options.smtpUrl,
    connectionTimeout: REQUEST_TIMEOUT_MS,
    greetingTimeout: REQUEST_TIMEOUT_MS,
    socketTimeout: REQUEST_TIMEOUT_MS,
    ...(ca ? { tls: { ca } } : {}),
    // The connection is opened through the egress policy (resolved once, checked, connected to
    // that address); nodemailer then speaks SMTP on it and does the TLS (smtps, STARTTLS) itself.
    getSocket: (options, callback) => {
      const secure = options.secure ?? Number(options.port) === 465;
      const port = Number(options.port) || (secure ? 465 : 587);
      egress.connect(options.host || 'localhost', port, REQUEST_TIMEOUT_MS).then(
        (connection) => callback(null, { connection }),
        (err: Error) => callback(err),
      );
    },
  });
  transports.set(rt.ctx, smtp);
  return smtp;
}

/** Sends one mail through the configured SMTP server; throws MailFailure (with attempts) after the last attempt. */
export async function sendMail(rt: Runtime, mail: Mail): Promise<DeliveryResult> {
  const from = rt.ctx.options.smtpFrom;
  const host = new URL(rt.ctx.options.smtpUrl!).host;
  let attempts = 0;
  const smtp = transport(rt);
  try {
    const info = await pRetry(async () => {
      attempts++;
      try {
        return await smtp.sendMail({ from, to: mail.to, subject: mail.subject, text: mail.text });
      } catch (err) {
        const e = err as SmtpError;
        if (err instanceof EgressDenied) throw new AbortError(new MailFailure(err.message));
        const reason = e.responseCode
          ? `${host} answered ${e.response ?? e.responseCode}`
          : `SMTP to ${host} failed: ${e.code ? `${e.code} ` : ''}${e.message}`;
        const failure = new MailFailure(reason, e.responseCode);
        // 4xx: the server asks to try again later; 5xx and bad credentials will not change.
        if (e.code === 'EAUTH' || (e.responseCode !== undefined && e.responseCode >= 500)) throw new AbortError(failure);
        throw failure;
      }
    }, retryOptions(rt));
    const code = Number(/^\d{3}/.exec(info.response)?.[0]) || undefined;
    const rejected = (info.rejected as unknown[]).map(String);
    const message = `Sent by SMTP via ${host} to ${(info.accepted as unknown[]).map(String).join(', ')}${rejected.length ? `; refused for ${rejected.join(', ')}` : ''}: ${info.response}`;
    return { success: true, message, ...(code ? { status_code: code } : {}), attempts };
  } catch (err) {
    const failure = err instanceof MailFailure ? err : new MailFailure((err as Error).message);
    throw Object.assign(failure, { attempts });
  }
}
