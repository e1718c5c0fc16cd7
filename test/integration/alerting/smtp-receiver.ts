import type { AddressInfo } from 'node:net';
import { simpleParser } from 'mailparser';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';

export interface ReceivedMail {
  /** Envelope recipients (RCPT TO). */
  to: string[];
  from: string;
  user?: string;
  subject: string;
  text: string;
}

/**
 * A real SMTP server on 127.0.0.1 (smtp-server), recording every accepted message. With `tls`,
 * it offers STARTTLS with that certificate; with `auth`, it requires those credentials.
 * `refuseNext` replies, in order, are given to the next RCPT TO commands instead of accepting.
 */
export async function smtpReceiver(options: { tls?: { cert: string; key: string }; auth?: { user: string; pass: string } } = {}) {
  const received: ReceivedMail[] = [];
  const state = { refuseNext: [] as { code: number; message: string }[] };
  const settings: SMTPServerOptions = {
    ...(options.tls ? { key: options.tls.key, cert: options.tls.cert } : { disabledCommands: ['STARTTLS'] }),
    authOptional: !options.auth,
    allowInsecureAuth: !options.tls,
    onAuth(auth, _session, callback) {
      if (options.auth && auth.username === options.auth.user && auth.password === options.auth.pass)
        return callback(null, { user: auth.username });
      callback(Object.assign(new Error('Invalid username or password'), { responseCode: 535 }));
    },
    onRcptTo(_address, _session, callback) {
      const refusal = state.refuseNext.shift();
      if (refusal) return callback(Object.assign(new Error(refusal.message), { responseCode: refusal.code }));
      callback();
    },
    onData(stream, session, callback) {
      simpleParser(stream).then(
        (mail) => {
          received.push({
            to: session.envelope.rcptTo.map((r) => r.address),
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            user: session.user as string | undefined,
            subject: mail.subject ?? '',
            text: mail.text ?? '',
          });
          callback();
        },
        (err: Error) => callback(err),
      );
    },
    logger: false,
  };
  const server = new SMTPServer(settings);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  return {
    received,
    state,
    port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
