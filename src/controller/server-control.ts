import type { IncomingMessage, ServerResponse } from 'node:http';
import { FORWARDED_HEADER, relayFailure, relayToLeader } from './forward.js';
import type { StatusHandlers } from './server.js';
import { header, JSON_TYPE, MAX_BODY, readBody, send, sendError } from './server-http.js';
import { signBody, verifyBearer, verifySignature } from './source/webhook.js';

/**
 * The status listener's authenticated routes: the git webhook (POST /hooks/git) and the
 * controls (POST /suspend, /resume, /reconcile). All need the webhook secret; a standby passes
 * them to the leader (forward.ts) and answers with the leader's answer.
 */

/** The leader's answer to a relayed request, or why there is none (`no_leader`). */
interface Relayed {
  status: number;
  type: string;
  body: string;
  outcome: 'forwarded' | 'no_leader';
}

const UNAUTHORIZED_CONTROL = 'send the webhook secret as Authorization: Bearer <secret>, or sign the body with X-Hub-Signature-256';

/** A control request carries the secret as a bearer token, or signs its body with it. */
const controlAllowed = (h: StatusHandlers, req: IncomingMessage, body: Buffer): boolean =>
  !!h.webhookSecret &&
  (verifyBearer(h.webhookSecret, req.headers.authorization) || verifySignature(h.webhookSecret, body, header(req, 'x-hub-signature-256')));

const notReachable = (why: string): Relayed => ({
  status: 503,
  type: JSON_TYPE,
  body: JSON.stringify({
    error: {
      code: 'no_leader',
      message: `no leader is reachable: this replica is a standby and ${why}; the leader's next interval run still fetches the change`,
    },
  }),
  outcome: 'no_leader',
});

/** On a standby, passes an authenticated request to the leader and answers with the leader's answer; undefined on the leader. */
async function relayed(h: StatusHandlers, req: IncomingMessage, path: string, body: Buffer): Promise<Relayed | undefined> {
  const secret = h.webhookSecret;
  // Both callers checked the secret already; without one nothing is relayed.
  if (!h.relay || !secret || h.relay.isLeader()) return undefined;
  if (header(req, FORWARDED_HEADER)) {
    h.logger.warn({ path }, 'a forwarded request reached a standby: not forwarding it again');
    return notReachable('the request was already forwarded once (it is never forwarded twice)');
  }
  let target: string | undefined;
  try {
    target = await h.relay.leaderUrl();
  } catch (err) {
    h.logger.warn({ path, err: (err as Error).message }, 'cannot tell who leads: not forwarding');
    return notReachable('the leader election cannot be read');
  }
  if (!target) {
    h.logger.warn({ path }, 'no leader known: not forwarding');
    return notReachable('no leader is known (none elected, or it advertised no URL)');
  }
  try {
    // Signed here rather than passing a bearer token on: the secret itself never leaves this replica.
    const headers = { ...req.headers, 'x-hub-signature-256': signBody(secret, body) };
    const answer = await relayToLeader(target, path, body, headers, h.relay.timeoutMs);
    h.logger.info({ path, leader: target, status: answer.status }, 'forwarded to the leader');
    return { status: answer.status, type: answer.contentType, body: answer.body, outcome: 'forwarded' };
  } catch (err) {
    const why = relayFailure(err);
    h.logger.warn({ path, leader: target, err: why }, 'forwarding to the leader failed');
    return notReachable(`forwarding to the leader failed (${why})`);
  }
}

/** POST /hooks/git: a signed push notification schedules a fetch now. */
export async function handleWebhook(h: StatusHandlers, req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
  const body = await readBody(req);
  if (!body) return sendError(res, 413, 'payload_too_large', `the body is larger than ${MAX_BODY} bytes`);
  if (!h.webhookSecret) {
    h.metrics.webhooks.inc({ outcome: 'disabled' });
    return sendError(res, 404, 'not_found', 'the webhook is off: start the controller with --webhook-secret');
  }
  if (!verifySignature(h.webhookSecret, body, header(req, 'x-hub-signature-256'))) {
    h.metrics.webhooks.inc({ outcome: 'unauthorized' });
    h.logger.warn({ remote: req.socket.remoteAddress }, 'webhook refused: missing or bad X-Hub-Signature-256');
    return sendError(res, 401, 'unauthorized', 'missing or invalid X-Hub-Signature-256 (sha256=<HMAC-SHA256 of the body with the webhook secret>)');
  }
  const forward = await relayed(h, req, path, body);
  if (forward) {
    h.metrics.webhooks.inc({ outcome: forward.outcome });
    return send(res, forward.status, forward.type, forward.body);
  }
  h.metrics.webhooks.inc({ outcome: 'accepted' });
  h.trigger(`webhook${header(req, 'x-github-event') ? ` (${header(req, 'x-github-event')})` : ''}`);
  return send(res, 202, JSON_TYPE, '{"status":"fetch scheduled"}');
}

/** POST /suspend and /resume; `published` tells the status stream at once. */
export async function handleSuspension(
  h: StatusHandlers,
  req: IncomingMessage,
  res: ServerResponse,
  path: '/suspend' | '/resume',
  published: () => void,
): Promise<void> {
  const body = (await readBody(req)) ?? Buffer.alloc(0);
  if (!h.webhookSecret)
    return sendError(res, 403, 'forbidden', 'suspend and resume need --webhook-secret (sent as a bearer token or an X-Hub-Signature-256)');
  if (!controlAllowed(h, req, body)) return sendError(res, 401, 'unauthorized', UNAUTHORIZED_CONTROL);
  // Suspension is the leader's: a standby passes it on and keeps its own flag as it is.
  const forward = await relayed(h, req, path, body);
  if (forward) return send(res, forward.status, forward.type, forward.body);
  if (path === '/suspend') h.suspend();
  else h.resume();
  published();
  return send(res, 200, JSON_TYPE, JSON.stringify({ suspended: path === '/suspend' }));
}

/** POST /reconcile (`dpctl controller reconcile`): a run now. Authenticated and relayed to the leader like /suspend. */
export async function handleReconcile(h: StatusHandlers, req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
  const body = (await readBody(req)) ?? Buffer.alloc(0);
  if (!h.webhookSecret)
    return sendError(res, 403, 'forbidden', 'reconcile needs --webhook-secret (sent as a bearer token or an X-Hub-Signature-256)');
  if (!controlAllowed(h, req, body)) return sendError(res, 401, 'unauthorized', UNAUTHORIZED_CONTROL);
  const forward = await relayed(h, req, path, body);
  if (forward) return send(res, forward.status, forward.type, forward.body);
  // A suspended controller starts no run: say so rather than accept a request that would wait forever.
  if (h.status().controller.suspended)
    return sendError(res, 409, 'suspended', 'reconciling is suspended: resume it first (POST /resume, dpctl controller resume)');
  // The controller's clock: the caller waits for a run that started at or after it (recent_runs[].started_at).
  const requestedAt = new Date().toISOString();
  h.trigger('reconcile');
  return send(res, 202, JSON_TYPE, JSON.stringify({ requested_at: requestedAt }));
}
