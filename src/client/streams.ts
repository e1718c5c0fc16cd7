import type WebSocket from 'ws';
import type { Alert, Run } from '../kinds/generated/kinds.js';
import { ApiError, DataPlatformError } from './errors.js';
import type { ClientEvent } from './events.js';
import { formatRoute, type HttpCore } from './http.js';
import type { TlsConnectOptions } from './transport.js';

/**
 * The spec's WebSocket streams (section 4) as async iterables that reconnect.
 *
 * The service refuses a connection before the upgrade with an ordinary error answer (401, 404,
 * 429) and, once connected, closes with a code (see docs/guides/streams.md):
 * 1001 (shutting down) and lost connections are reconnected with backoff; 4401 renews a user's
 * token and reconnects; 4403 / 4404 and refusals end the stream with an error.
 */

/** Section 6: one step of a pipeline run changed state. */
export interface StepUpdate {
  type: 'step_update';
  step_id: string;
  step_name: string;
  status: 'running' | 'completed' | 'failed' | 'skipped';
  /** 0 while running and for a step skipped without running. */
  duration_seconds: number;
  timestamp: string;
}

/** An alert fired, was acknowledged or was resolved (the alert as the REST API shows it). */
export interface AlertEvent {
  type: 'alert_fired' | 'alert_acknowledged' | 'alert_resolved';
  alert: Alert;
  timestamp: string;
}

export interface StreamOptions {
  signal?: AbortSignal;
  /** Reconnect after a lost connection or a server shutdown (default true). */
  reconnect?: boolean;
  /** Failed connection attempts in a row before the stream ends with the last error (default 10). */
  maxAttempts?: number;
  /** Backoff between attempts: from `minBackoffMs` (default 250), doubling up to `maxBackoffMs` (default 30 s). */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /**
   * Called after a reconnect. The alert stream does not replay what happened while away: list
   * the alerts here to catch up. The pipeline run stream replays the run, and the stream drops
   * the step updates it already delivered.
   */
  onReconnect?: () => void;
}

export interface PipelineRunStreamOptions extends StreamOptions {
  /**
   * The pipeline's project: given, the stream ends by itself when the run has ended (it reads
   * the run after each finished step); without it, the stream runs until closed.
   */
  projectId?: string;
}

/** The socket closed with a code that another attempt will not change (4403, 4404). */
export class StreamClosedError extends DataPlatformError {
  override name = 'StreamClosedError';
  constructor(
    readonly path: string,
    readonly code: number,
    readonly reason: string,
  ) {
    super(`stream ${path} closed by the service: ${code}${reason ? ` ${reason}` : ''}`);
  }
}

const CLOSE = {
  normal: 1000,
  goingAway: 1001,
  abnormal: 1006,
  internalError: 1011,
  unauthorized: 4401,
  forbidden: 4403,
  notFound: 4404,
} as const;
const FINAL_CLOSE_CODES = new Set<number>([CLOSE.forbidden, CLOSE.notFound]);
const TERMINAL_RUN = new Set<Run['status']>(['succeeded', 'failed', 'cancelled']);

/** How one connection attempt ended. */
type Outcome =
  | { type: 'closed'; code: number; reason: string; opened: boolean }
  | { type: 'refused'; error: ApiError }
  | { type: 'network'; error: Error; opened: boolean };

export interface StreamContext {
  core: HttpCore;
  tls: TlsConnectOptions;
  userAgent: string;
  emit: (event: ClientEvent) => void;
  signal?: AbortSignal;
}

/**
 * Messages of one stream, in order, as an async iterable. Iterate it once; `close()` (or the
 * signal, or `break` in a for-await loop) ends it.
 */
export class EventStream<T> implements AsyncIterable<T> {
  readonly #queue: T[] = [];
  #wake: (() => void) | undefined;
  #error: Error | undefined;
  #ended = false;
  #socket: WebSocket | undefined;
  readonly #abort = new AbortController();

  constructor(
    private readonly ctx: StreamContext,
    readonly path: string,
    private readonly options: StreamOptions,
    /** Decides per message whether to deliver it, and whether the stream is then complete. */
    private readonly accept: (message: T) => Promise<{ deliver: boolean; done?: boolean }> | { deliver: boolean; done?: boolean },
  ) {
    for (const s of [options.signal, ctx.signal]) {
      if (s?.aborted) this.close();
      s?.addEventListener('abort', () => this.close(), { once: true });
    }
    if (!this.#ended) void this.run();
  }

  /** Ends the stream: pending and future iterations finish. */
  close(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#abort.abort();
    this.#socket?.close(CLOSE.normal);
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    try {
      for (;;) {
        const next = this.#queue.shift();
        if (next !== undefined) {
          yield next;
          continue;
        }
        if (this.#error) throw this.#error;
        if (this.#ended) return;
        await new Promise<void>((resolve) => (this.#wake = resolve));
        this.#wake = undefined;
      }
    } finally {
      this.close();
    }
  }

  private push(message: T) {
    this.#queue.push(message);
    this.#wake?.();
  }

  private fail(error: Error) {
    if (this.#ended) return;
    this.#error = error;
    this.close();
  }

  /** Connects, and reconnects while the outcome allows it. */
  private async run() {
    const maxAttempts = this.options.maxAttempts ?? 10;
    const minBackoff = this.options.minBackoffMs ?? 250;
    const maxBackoff = this.options.maxBackoffMs ?? 30_000;
    let failures = 0;
    let renewedFor: string | undefined;
    let connectedBefore = false;
    while (!this.#ended) {
      let token: string;
      try {
        token = await this.ctx.core.token(this.#abort.signal);
      } catch (err) {
        return this.fail(err as Error);
      }
      if (this.#ended) return;
      const outcome = await this.connectOnce(token, () => {
        failures = 0;
        if (connectedBefore) this.options.onReconnect?.();
        connectedBefore = true;
      });
      if (this.#ended) return;

      let waitMs: number;
      if (outcome.type === 'refused') {
        const e = outcome.error;
        if (e.status === 401 && renewedFor !== token && (await this.renew(token))) {
          renewedFor = token;
          continue;
        }
        if (e.status === 429) waitMs = e.retryAfterMs ?? 1000;
        else if (e.status >= 500 && this.options.reconnect !== false) waitMs = backoff(failures++, minBackoff, maxBackoff);
        else return this.fail(e);
      } else if (outcome.type === 'closed') {
        if (outcome.code === CLOSE.unauthorized) {
          if (await this.renew(token)) continue;
          return this.fail(new StreamClosedError(this.path, outcome.code, outcome.reason));
        }
        if (FINAL_CLOSE_CODES.has(outcome.code) || this.options.reconnect === false) {
          return outcome.code === CLOSE.normal ? this.close() : this.fail(new StreamClosedError(this.path, outcome.code, outcome.reason));
        }
        waitMs = backoff(failures++, minBackoff, maxBackoff);
      } else {
        if (this.options.reconnect === false) return this.fail(outcome.error);
        waitMs = backoff(failures++, minBackoff, maxBackoff);
      }
      if (failures > maxAttempts) {
        const last = outcome.type === 'closed' ? new StreamClosedError(this.path, outcome.code, outcome.reason) : outcome.error;
        return this.fail(
          new DataPlatformError(`stream ${this.path}: gave up after ${maxAttempts} attempts in a row; last: ${last.message}`),
        );
      }
      this.ctx.emit({ type: 'retry', method: 'GET', route: this.path, attempt: failures + 1, reason: describe(outcome) });
      await sleep(waitMs, this.#abort.signal);
    }
  }

  private async renew(token: string): Promise<boolean> {
    try {
      return await this.ctx.core.renew(token, this.#abort.signal);
    } catch (err) {
      this.fail(err as Error);
      return false;
    }
  }

  /** One connection, from the handshake to the close. */
  private async connectOnce(token: string, onOpen: () => void): Promise<Outcome> {
    // `ws` loads with the first stream: the CLI's plans and applies never open one.
    const { default: WebSocket } = await import('ws');
    // Closed while it loaded: run() stops on this outcome.
    if (this.#ended) return { type: 'closed', code: 1000, reason: '', opened: false };
    const url = new URL(this.ctx.core.url({ route: this.path }).replace(/^http/, 'ws'));
    url.searchParams.set('token', token);
    // What the error shows: the URL without its token.
    const info = { method: 'GET', route: this.path, url: this.ctx.core.url({ route: this.path }) };
    return new Promise<Outcome>((resolve) => {
      let opened = false;
      let settled = false;
      const settle = (o: Outcome) => {
        if (settled) return;
        settled = true;
        this.#socket = undefined;
        resolve(o);
      };
      const socket = new WebSocket(url, {
        ...this.ctx.tls,
        headers: { 'user-agent': this.ctx.userAgent },
        maxPayload: 1024 * 1024,
      } as WebSocket.ClientOptions);
      this.#socket = socket;
      socket.once('open', () => {
        opened = true;
        onOpen();
      });
      // Messages are handled one at a time, in order, even when `accept` has to read the run.
      let chain = Promise.resolve();
      socket.on('message', (data) => {
        chain = chain.then(async () => {
          let message: T;
          try {
            message = JSON.parse(String(data)) as T;
          } catch {
            return; // not JSON: nothing the stream could deliver
          }
          try {
            const { deliver, done } = await this.accept(message);
            if (deliver) this.push(message);
            if (done) this.close();
          } catch (err) {
            this.fail(err as Error);
          }
        });
      });
      socket.once('unexpected-response', (_req, res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          const requestId = typeof res.headers['x-request-id'] === 'string' ? res.headers['x-request-id'] : undefined;
          this.ctx.emit({ type: 'response', ...info, status, attempt: 1, durationMs: 0, requestId });
          settle({ type: 'refused', error: this.ctx.core.apiError(info, status, body, res.headers, requestId, 1, false) });
          socket.terminate();
        });
      });
      socket.once('error', (error) => {
        if (!settled && !opened) this.ctx.emit({ type: 'network_error', ...info, code: (error as NodeJS.ErrnoException).code, attempt: 1 });
        settle({ type: 'network', error: new DataPlatformError(`stream ${this.path}: ${this.ctx.core.redact(error.message)}`), opened });
      });
      socket.once('close', (code, reason) => {
        void chain.then(() => settle({ type: 'closed', code, reason: String(reason), opened }));
      });
    });
  }
}

function backoff(failures: number, min: number, max: number): number {
  const base = Math.min(max, min * 2 ** failures);
  return Math.round(base / 2 + (Math.random() * base) / 2);
}

function describe(o: Outcome): string {
  if (o.type === 'refused') return `refused: HTTP ${o.error.status} ${o.error.code}`;
  if (o.type === 'closed') return `closed: ${o.code}${o.reason ? ` ${o.reason}` : ''}`;
  return o.error.message;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/** The two streams of the spec. */
export class StreamsClient {
  constructor(
    private readonly ctx: StreamContext,
    private readonly readRun: (projectId: string, pipelineId: string, runId: string) => Promise<Run>,
  ) {}

  /** Live alert notifications of the tenant (of its project, for an API key). */
  alerts(options: StreamOptions = {}): EventStream<AlertEvent> {
    return new EventStream<AlertEvent>(this.ctx, '/ws/alerts', options, () => ({ deliver: true }));
  }

  /**
   * Step updates of one pipeline run: what already happened first, then live. Each
   * (step, status) is delivered once, also across reconnects.
   */
  pipelineRun(pipelineId: string, runId: string, options: PipelineRunStreamOptions = {}): EventStream<StepUpdate> {
    const seen = new Set<string>();
    const key = (stepId: string, status: string) => `${stepId}\u0000${status}`;
    const { projectId } = options;
    /** Once the run has ended: every (step, status) message it will have had. */
    let expected: string[] | undefined;
    /** Every (step, status) message the stored run stands for. */
    const storedKeys = (run: Run) =>
      run.steps.flatMap(({ step_id, status, started_at }) => [
        ...(started_at ? [key(step_id, 'running')] : []),
        ...(status !== 'pending' && status !== 'running' ? [key(step_id, status)] : []),
      ]);
    const endedRun = async (): Promise<string[] | undefined> => {
      // The stored run can lag the stream: its progress is written at most every 50 ms (later under
      // load) and its end just after its last step. Until it holds every update seen, a step it
      // still shows running may have ended, and a run whose steps all ended is about to: look again
      // (for up to a minute) rather than wait for a message that will never come.
      for (let waited = 0, pause = 100; waited < 60_000; waited += pause, pause = Math.min(1_000, pause * 2)) {
        const run = await this.readRun(projectId!, pipelineId, runId);
        const stored = storedKeys(run);
        if (TERMINAL_RUN.has(run.status)) return stored;
        const caughtUp = [...seen].every((k) => stored.includes(k));
        if (caughtUp && run.steps.some((s) => s.status === 'pending' || s.status === 'running')) return undefined;
        await new Promise((r) => setTimeout(r, pause));
      }
      return undefined;
    };
    const path = formatRoute('/ws/pipelines/{pipelineId}/runs/{runId}', { pipelineId, runId });
    return new EventStream<StepUpdate>(this.ctx, path, options, async (m) => {
      const k = key(m.step_id, m.status);
      if (seen.has(k)) return { deliver: false };
      seen.add(k);
      if (projectId === undefined) return { deliver: true };
      if (!expected && m.status !== 'running') expected = await endedRun();
      return { deliver: true, done: expected?.every((e) => seen.has(e)) ?? false };
    });
  }
}
