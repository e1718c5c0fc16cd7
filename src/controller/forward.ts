import type { IncomingHttpHeaders } from 'node:http';
import { request } from 'undici';

/**
 * Marks a request that a standby relayed to the leader. A request carrying it is never relayed
 * again: if it reaches a replica that is not (or no longer) the leader, that replica answers
 * 503 instead of passing it on, so two standbys can never bounce a webhook between them.
 */
export const FORWARDED_HEADER = 'x-dpctl-forwarded';

/**
 * The headers a relay passes on: the body's type, the signature (the leader checks it again)
 * and GitHub's delivery headers (its event name ends up in the run's trigger). Never
 * `authorization`: a bearer token is the webhook secret itself, and the leader's URL comes from
 * the Lease or a file, so the caller signs the body instead (see the status listener).
 */
const RELAYED_HEADERS = [
  'content-type',
  'user-agent',
  'x-hub-signature-256',
  'x-hub-signature',
  'x-github-event',
  'x-github-delivery',
  'x-github-hook-id',
  'x-github-hook-installation-target-id',
  'x-github-hook-installation-target-type',
];

/** A webhook lasts 10 s on GitHub's side; the relay must answer well within it. */
export const RELAY_TIMEOUT_MS = 5_000;

/** The leader's answer, passed back to the caller as it is. */
export interface RelayAnswer {
  status: number;
  contentType: string;
  body: string;
}

/**
 * Sends `body` with the relayed headers to `<leaderUrl><path>` and returns the leader's answer.
 * Rejects when the leader cannot be reached in time (refused, reset, timed out).
 */
export async function relayToLeader(
  leaderUrl: string,
  path: string,
  body: Buffer,
  headers: IncomingHttpHeaders,
  timeoutMs = RELAY_TIMEOUT_MS,
): Promise<RelayAnswer> {
  const out: Record<string, string> = { [FORWARDED_HEADER]: '1' };
  for (const name of RELAYED_HEADERS) {
    const value = headers[name];
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  const res = await request(`${leaderUrl.replace(/\/+$/, '')}${path}`, {
    method: 'POST',
    headers: out,
    body,
    signal: AbortSignal.timeout(timeoutMs),
  });
  const type = res.headers['content-type'];
  return {
    status: res.statusCode,
    contentType: (Array.isArray(type) ? type[0] : type) ?? 'application/json; charset=utf-8',
    body: await res.body.text(),
  };
}

/** Why a relay failed, for the caller and the log, without the stack. */
export function relayFailure(err: unknown): string {
  const e = err as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
  if (e?.name === 'TimeoutError') return 'the leader did not answer in time';
  return e?.cause?.code ?? e?.code ?? e?.message ?? String(err);
}
