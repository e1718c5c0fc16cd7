import type { TestService, TestTenant } from '../support/service.js';

/**
 * The abuse suite's measure of isolation: while an attack runs, another tenant keeps calling the
 * API (a cheap authenticated GET, one at a time) and every answer's latency is recorded. An
 * attack that blocks the event loop or starves the store shows up as a long gap, since the
 * service runs in this process and answers nothing while it is blocked.
 */
export interface Probe {
  count: number;
  /** Milliseconds. */
  p50: number;
  max: number;
  /** Status codes other than 200 that the bystander got. */
  failures: number[];
}

export async function whileServingOther<T>(
  svc: TestService,
  bystander: TestTenant,
  attack: () => Promise<T>,
  path = '/projects?limit=1',
): Promise<{ result: T; probe: Probe }> {
  const latencies: number[] = [];
  const failures: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      const res = await svc.call(bystander, 'GET', path);
      latencies.push(performance.now() - started);
      if (res.status !== 200) failures.push(res.status);
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  try {
    const result = await attack();
    return { result, probe: summarise(latencies, failures) };
  } finally {
    running = false;
    await loop;
  }
}

function summarise(latencies: number[], failures: number[]): Probe {
  const sorted = [...latencies].sort((a, b) => a - b);
  return { count: sorted.length, p50: sorted[Math.floor(sorted.length / 2)] ?? 0, max: sorted[sorted.length - 1] ?? 0, failures };
}

/** The bound a bystander's slowest answer must stay under during an attack (generous: CI is a loaded 2-core machine). */
export const BYSTANDER_MAX_MS = 1_000;
