import type { Runtime } from './runtime.js';

/** How every notification delivery (HTTP and SMTP) is bounded and retried. */
export const REQUEST_TIMEOUT_MS = 5_000;
export const RETRIES = 2;
export const BACKOFF_MS = 500;

/** How every delivery is retried: RETRIES more attempts, exponential backoff scaled by the time scale. */
export function retryOptions(rt: Runtime) {
  const scale = rt.ctx.options.timeScale;
  return {
    retries: RETRIES,
    factor: 2,
    minTimeout: Math.max(1, BACKOFF_MS / scale),
    maxTimeout: Math.max(1, (BACKOFF_MS * 8) / scale),
    randomize: false,
  };
}

export interface DeliveryResult {
  success: boolean;
  message: string;
  status_code?: number;
  attempts: number;
}
