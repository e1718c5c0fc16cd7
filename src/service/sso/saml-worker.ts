import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { ApiError } from '../errors.js';

/**
 * SAML responses are checked in a worker thread, one at a time, never on the event loop.
 *
 * Anyone can start a sign-in with a tenant's SAML provider and post a response, and node-saml's
 * XML stack does work that grows with the square of the elements under one parent: within the size
 * bounds of saml.ts (128 KiB, 2,000 tags), a crafted response still took 40-120 ms to refuse. On
 * the event loop, one address within its anonymous budget (a login start and a post, 10 a second)
 * kept every tenant's requests waiting. Here the worker spends that time and the service goes on;
 * at most SAML_QUEUE_MAX responses wait, the next ones are refused with 429, and one that takes
 * over SAML_CHECK_TIMEOUT_MS ends its worker (a new one starts for the next).
 */
export const SAML_QUEUE_MAX = 16;
export const SAML_CHECK_TIMEOUT_MS = 10_000;

/** node-saml's options of a provider, plain data only (they cross to the worker as a message). */
export type SamlSettings = Record<string, string | number | boolean | undefined>;

/** What the worker returns of node-saml's profile: its data, without its methods. */
export type SamlProfile = Record<string, unknown> & { nameID?: string; issuer?: string };

interface Check {
  id: number;
  settings: SamlSettings;
  requestId: string | null;
  samlResponse: string;
  resolve(profile: SamlProfile | null): void;
  reject(err: Error): void;
}

interface Answer {
  id: number;
  profile?: SamlProfile | null;
  error?: string;
}

/**
 * The worker, CommonJS, given node-saml's path. InResponseTo is checked through a cache that knows
 * only the flow's own request id (the flow row was claimed by its RelayState before the check),
 * as the service-side SAML object of saml.ts does.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { SAML } = require(workerData.nodeSaml);
const flowCache = (requestId) => ({
  saveAsync: async () => null,
  getAsync: async (key) => (requestId && key === requestId ? new Date().toISOString() : null),
  removeAsync: async (key) => key,
});
parentPort.on('message', async ({ id, settings, requestId, samlResponse }) => {
  try {
    const saml = new SAML({ ...settings, cacheProvider: flowCache(requestId) });
    const { profile } = await saml.validatePostResponseAsync({ SAMLResponse: samlResponse });
    parentPort.postMessage({ id, profile: profile && JSON.parse(JSON.stringify(profile)) });
  } catch (err) {
    parentPort.postMessage({ id, error: String((err && err.message) || err) });
  }
});`;

export class SamlChecker {
  private worker?: Worker;
  private readonly waiting: Check[] = [];
  private current?: { check: Check; timer: NodeJS.Timeout };
  private nextId = 0;

  constructor(private readonly limits = { queueMax: SAML_QUEUE_MAX, timeoutMs: SAML_CHECK_TIMEOUT_MS }) {}

  /** The response's profile, or an Error with node-saml's reason; 429 when too many wait. */
  check(settings: SamlSettings, requestId: string | null, samlResponse: string): Promise<SamlProfile | null> {
    if (this.waiting.length >= this.limits.queueMax)
      throw new ApiError(
        'rate_limited',
        `${this.limits.queueMax} SAML sign-ins are waiting to be checked; retry in a few seconds`,
        undefined,
        429,
        { 'Retry-After': '5' },
      );
    return new Promise((resolve, reject) => {
      this.waiting.push({ id: ++this.nextId, settings, requestId, samlResponse, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    if (this.current) return;
    const check = this.waiting.shift();
    if (!check) return;
    const worker = (this.worker ??= this.start());
    const timer = setTimeout(() => {
      this.end(worker);
      this.settle({ id: check.id, error: `the response took over ${this.limits.timeoutMs / 1000} s to check` });
    }, this.limits.timeoutMs);
    this.current = { check, timer };
    const { id, settings, requestId, samlResponse } = check;
    worker.postMessage({ id, settings, requestId, samlResponse });
  }

  private settle(answer: Answer): void {
    const current = this.current;
    if (!current || current.check.id !== answer.id) return; // the answer of a check that timed out
    clearTimeout(current.timer);
    this.current = undefined;
    if (answer.error !== undefined) current.check.reject(new Error(answer.error));
    else current.check.resolve(answer.profile ?? null);
    this.next();
  }

  private start(): Worker {
    const nodeSaml = createRequire(import.meta.url).resolve('@node-saml/node-saml');
    // A response is at most 128 KiB: a check that needs more memory than this is not a real one.
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { nodeSaml }, resourceLimits: { maxOldGenerationSizeMb: 128 } });
    worker.on('message', (answer: Answer) => this.settle(answer));
    const failed = (reason: string) => {
      this.end(worker);
      if (this.current) this.settle({ id: this.current.check.id, error: reason });
    };
    worker.on('error', (err) => failed(`the check failed: ${err.message}`));
    worker.on('exit', (code) => failed(`the checking worker exited (${code})`));
    // After the listeners: a 'message' listener refs the worker's port again, which kept a process that was done alive.
    worker.unref();
    return worker;
  }

  /** Ends a worker; the next check starts a new one. */
  private end(worker: Worker): void {
    if (this.worker === worker) this.worker = undefined;
    worker.removeAllListeners('exit');
    void worker.terminate();
  }
}

/** One checker per process: SAML sign-ins are rare, and one worker bounds what they can take (one core at most). */
export const samlChecker = new SamlChecker();
