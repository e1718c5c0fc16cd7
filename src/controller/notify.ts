import { createHmac } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Logger } from 'pino';

/**
 * Notifications, as Flux's notification-controller and Argo CD Notifications send them: the
 * controller's events go to receivers, a generic webhook (JSON, HMAC-signed like GitHub's
 * webhooks, retried with back-off) or a Slack incoming webhook. A condition that persists
 * notifies once, then again when its message changes or every `repeatMs`; each receiver sends at
 * most `perMinute` a minute (the rest is counted and summarised in the next one that goes out).
 */

export type EventReason =
  | 'RevisionApplied'
  | 'ApplyFailed'
  | 'PlanWarning'
  | 'DriftDetected'
  | 'DriftCorrected'
  | 'ResourceDegraded'
  | 'ResourceRecovered'
  | 'Suspended'
  | 'Resumed';

export interface ControllerEvent {
  reason: EventReason;
  severity: 'info' | 'warning' | 'error';
  /** What it is about: the revision, or a resource (`Connector analytics/orders-db`). */
  subject: string;
  message: string;
  revision?: string | null;
}

export interface Receiver {
  type: 'webhook' | 'slack';
  url: string;
  /** webhook: HMAC-SHA256 key of the X-Dpctl-Signature-256 header. */
  secret?: string;
}

export interface NotifierOptions {
  receivers: Receiver[];
  /** Source id and controller identity, in every event. */
  source: string;
  log?: Logger;
  /** The same condition with the same message again after this long (default 1 h). */
  repeatMs?: number;
  perMinute?: number;
  /** Attempts per delivery (default 5), first retry after `retryBaseMs` (default 1 s), doubling. */
  attempts?: number;
  retryBaseMs?: number;
  /** Extra CA certificates (PEM) to trust for receivers. */
  ca?: string;
  now?: () => number;
}

/** Events that end a condition, by the reason that started it: they clear its dedup entry. */
const ENDS: Partial<Record<EventReason, EventReason>> = {
  DriftCorrected: 'DriftDetected',
  ResourceRecovered: 'ResourceDegraded',
  RevisionApplied: 'ApplyFailed',
  Resumed: 'Suspended',
};

/**
 * Deliveries one receiver may have waiting (the one being sent included). A receiver that is down
 * holds each for up to ~65 s (5 attempts of 10 s and the back-off): beyond this many, new events
 * are counted as dropped, as the rate limit counts them, instead of queuing without bound.
 */
export const MAX_QUEUED_PER_RECEIVER = 100;

/** One receiver's deliveries, sent one after the other so that it gets them in order. */
interface Queue {
  tail: Promise<void>;
  length: number;
}

export class Notifier {
  private readonly sent = new Map<string, { message: string; at: number }>();
  private readonly windows = new Map<Receiver, { start: number; count: number; dropped: number }>();
  private readonly queues = new Map<Receiver, Queue>();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly now: () => number;

  constructor(private readonly o: NotifierOptions) {
    this.now = o.now ?? Date.now;
  }

  get enabled(): boolean {
    return this.o.receivers.length > 0;
  }

  /**
   * Sends the event to every receiver, unless it repeats one sent recently. Never throws. Each
   * receiver gets its events in the order they happened: a delivery waits for the one before it
   * (retries included), so a recovery never lands before the failure it ends.
   */
  notify(event: ControllerEvent): void {
    if (!this.enabled || this.duplicate(event)) return;
    for (const r of this.o.receivers) {
      let queue = this.queues.get(r);
      if (!queue) this.queues.set(r, (queue = { tail: Promise.resolve(), length: 0 }));
      const dropped = this.admit(r, queue.length >= MAX_QUEUED_PER_RECEIVER);
      if (dropped === null) continue;
      // The body is built now: `at` is when the event happened, not when its turn came.
      const body = this.body(r, event, dropped);
      queue.length++;
      const p = queue.tail
        .then(() => this.deliver(r, body, event.reason))
        // A rejected link would skip every delivery queued behind it.
        .catch((err: Error) => this.o.log?.warn({ receiver: redactUrl(r.url), err: err.message }, 'notification not delivered'))
        .finally(() => {
          queue.length--;
          this.inFlight.delete(p);
        });
      queue.tail = p;
      this.inFlight.add(p);
    }
  }

  /** Waits for deliveries under way (at shutdown), at most `ms`. */
  async flush(ms = 5_000): Promise<void> {
    await Promise.race([Promise.allSettled([...this.inFlight]), new Promise((r) => setTimeout(r, ms).unref())]);
  }

  private duplicate(e: ControllerEvent): boolean {
    const ended = ENDS[e.reason];
    if (ended) {
      const announced = this.sent.delete(`${ended}\u0000${e.subject}`);
      // A recovery is news only when the failure was announced; the other endings are news of their own.
      return e.reason === 'ResourceRecovered' && !announced;
    }
    const key = `${e.reason}\u0000${e.subject}`;
    const last = this.sent.get(key);
    if (last && last.message === e.message && this.now() - last.at < (this.o.repeatMs ?? 3_600_000)) return true;
    this.sent.set(key, { message: e.message, at: this.now() });
    return false;
  }

  /**
   * The receiver's per-minute budget: null when spent or its queue is full (counted as dropped),
   * else how many were dropped before.
   */
  private admit(r: Receiver, queueFull: boolean): number | null {
    const w = this.windows.get(r) ?? { start: this.now(), count: 0, dropped: 0 };
    if (this.now() - w.start >= 60_000) Object.assign(w, { start: this.now(), count: 0 });
    this.windows.set(r, w);
    if (queueFull || w.count >= (this.o.perMinute ?? 30)) {
      w.dropped++;
      return null;
    }
    w.count++;
    const dropped = w.dropped;
    w.dropped = 0;
    return dropped;
  }

  private body(r: Receiver, e: ControllerEvent, dropped: number): string {
    return JSON.stringify(
      r.type === 'slack'
        ? slackMessage(e, this.o.source, dropped)
        : { ...e, source: this.o.source, at: new Date(this.now()).toISOString(), dropped_since_last: dropped },
    );
  }

  /** POSTs the body, retried with back-off; never throws (a delivery that gives up is logged). */
  private async deliver(r: Receiver, body: string, reason: EventReason): Promise<void> {
    const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': 'dpctl-controller' };
    if (r.secret) headers['x-dpctl-signature-256'] = `sha256=${createHmac('sha256', r.secret).update(body).digest('hex')}`;
    const attempts = this.o.attempts ?? 5;
    for (let i = 1; ; i++) {
      const error = await post(r.url, body, headers, this.o.ca).then(
        () => null,
        (err: Error) => err.message,
      );
      if (error === null) return;
      if (i >= attempts)
        return void this.o.log?.warn({ receiver: redactUrl(r.url), reason, err: error, attempts }, 'notification not delivered');
      await new Promise((res) => setTimeout(res, (this.o.retryBaseMs ?? 1_000) * 2 ** (i - 1)).unref());
    }
  }
}

function slackMessage(e: ControllerEvent, source: string, dropped: number) {
  const icon = { error: ':red_circle:', warning: ':warning:', info: ':large_green_circle:' }[e.severity];
  const more = dropped ? `\n_${dropped} more notification${dropped === 1 ? '' : 's'} were rate-limited._` : '';
  return {
    text: `${icon} *${e.reason}* ${e.subject} (${source}${e.revision ? ` @ ${e.revision.slice(0, 12)}` : ''})\n${e.message}${more}`,
  };
}

/** Receiver URLs carry their own secret (Slack's path): logs show the host only. */
const redactUrl = (url: string) => {
  try {
    return new URL(url).host;
  } catch {
    return '(invalid URL)';
  }
};

/** One POST (https, or http inside a cluster); a 2xx is delivered, anything else (or no answer in 10 s) is an error to retry. */
function post(url: string, body: string, headers: Record<string, string>, ca?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = url.startsWith('http:') ? httpRequest : httpsRequest;
    const req = request(
      url,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        timeout: 10_000,
        ...(ca ? { ca } : {}),
      },
      (res) => {
        res.resume();
        res.on('end', () =>
          (res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`)),
        );
      },
    );
    req.on('timeout', () => req.destroy(new Error('no answer in 10 s')));
    req.on('error', reject);
    req.end(body);
  });
}
