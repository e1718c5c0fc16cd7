import { hostname } from 'node:os';

/** This replica's default identity: the pod name in a cluster, `host:pid` elsewhere. */
export function defaultIdentity(env: NodeJS.ProcessEnv = process.env): string {
  const pod = env.POD_NAME?.trim();
  return pod ? pod : `${hostname()}:${process.pid}`;
}

/** The error an `acquire` rejects with when its signal aborts (same name as fetch/timers use). */
export function abortError(signal: AbortSignal): Error {
  const reason = signal.reason;
  if (reason instanceof Error && reason.name === 'AbortError') return reason;
  return new DOMException('leader election aborted', 'AbortError');
}

/** A configuration or permission problem that retrying cannot fix: acquire rejects with it. */
export class LeaderElectionError extends Error {
  override name = 'LeaderElectionError';
}

/** Sleeps `ms`, or rejects with an AbortError as soon as `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(abortError(signal));
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** Up to +20% random jitter, so standbys started together do not poll in lockstep (as client-go does). */
export const jitter = (ms: number) => Math.round(ms * (1 + Math.random() * 0.2));

/** The listeners of `onLost`: called once per loss (held -> lost), never for a voluntary release. */
export class LostListeners {
  private readonly listeners: Array<() => void> = [];

  add(listener: () => void) {
    this.listeners.push(listener);
  }

  fire() {
    for (const listener of [...this.listeners]) {
      try {
        listener();
      } catch {
        // One listener's failure must not keep the others from stopping their work.
      }
    }
  }
}
