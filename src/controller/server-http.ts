import type { IncomingMessage, ServerResponse } from 'node:http';
import { renderStatusHtml, type ControllerStatus } from './status.js';
import { STATUS_PAGE_CSP } from './status-page.js';

/** The status listener's answers and request reading: plain node:http, no framework. */

/** GitHub caps webhook payloads at 25 MB; anything larger is refused before it is read whole. */
export const MAX_BODY = 25 * 1024 * 1024;

export const JSON_TYPE = 'application/json; charset=utf-8';

export function send(res: ServerResponse, status: number, type: string, body: string, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', ...headers });
  res.end(body);
}

/** The spec's error envelope. */
export function sendError(res: ServerResponse, status: number, code: string, message: string) {
  send(res, status, JSON_TYPE, JSON.stringify({ error: { code, message } }));
}

/** The status page, with a policy that lets only its own inline style and script run. */
export const sendPage = (res: ServerResponse, s: ControllerStatus) =>
  send(res, 200, 'text/html; charset=utf-8', renderStatusHtml(s), {
    'content-security-policy': STATUS_PAGE_CSP,
    'referrer-policy': 'no-referrer',
  });

/** The body, or undefined when it is larger than MAX_BODY (the request is then destroyed). */
export function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        resolve(undefined);
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** Prefers HTML only when the client asks for it before JSON (a browser does; curl and fetch do not). */
export const wantsHtml = (accept: string | undefined) => {
  const a = accept ?? '';
  const html = a.indexOf('text/html');
  const json = a.indexOf('application/json');
  return html !== -1 && (json === -1 || html < json);
};

export const header = (req: IncomingMessage, name: string): string | undefined => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};
