/**
 * The other tenant's view of a service under a load of someone else's (bench/scheduler.ts,
 * bench/waves.ts): its GET connectors?limit=10, with its API key, at a fixed open-loop rate.
 */
import { OTHER_TENANT, hostOf, type MeasuredService } from '../service.js';
import { TestHttp } from '../../test/support/http.js';

export interface ProbeResult {
  p99: number;
  p50: number;
  max: number;
  count: number;
  failures: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const percentile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] : NaN;
};

/**
 * Open loop: one request every 1000/rate ms for `seconds` (whether or not the previous one
 * answered, so a stalled service shows as latency, not as fewer requests); latencies of the 200s,
 * failures counted.
 */
export async function probeOtherTenant(server: MeasuredService, seconds: number, rate: number): Promise<ProbeResult> {
  const http = new TestHttp(server.ready.caPath);
  const url = `https://${hostOf(OTHER_TENANT)}:${server.ready.port}/api/v1/projects/${server.ready.otherProjectId}/connectors?limit=10`;
  const token = server.ready.otherApiKey!;
  const latencies: number[] = [];
  let failures = 0;
  try {
    await http.call('GET', url, { token }); // the connection and TLS handshake, unmeasured
    const inFlight: Promise<void>[] = [];
    const interval = 1000 / rate;
    const end = performance.now() + seconds * 1000;
    for (let next = performance.now(); next < end; next += interval) {
      const wait = next - performance.now();
      if (wait > 0) await sleep(wait);
      const started = performance.now();
      inFlight.push(
        http.call('GET', url, { token }).then(
          (res) => {
            if (res.status === 200) latencies.push(performance.now() - started);
            else failures++;
          },
          () => void failures++,
        ),
      );
    }
    await Promise.all(inFlight);
  } finally {
    await http.close();
  }
  return {
    p99: percentile(latencies, 0.99),
    p50: percentile(latencies, 0.5),
    max: Math.max(...latencies),
    count: latencies.length,
    failures,
  };
}
