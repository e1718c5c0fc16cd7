/** Counters of one endpoint (method + route pattern, e.g. `GET /projects/{id}/connectors`). */
export interface EndpointStats {
  /** HTTP requests sent, every attempt included. */
  calls: number;
  /** Attempts after the first of a call (after a 429, a 401 refresh, a 5xx or a network error). */
  retries: number;
  /** 429 answers. */
  rateLimited: number;
  /** Network errors and 5xx answers. */
  failed: number;
}

export interface ClientStats {
  calls: number;
  retries: number;
  rateLimited: number;
  failed: number;
  /** POST /auth/login and POST /auth/refresh calls, also counted under their endpoints. */
  logins: number;
  refreshes: number;
  /** Time spent waiting for endpoints paused by a 429. */
  rateLimitWaitMs: number;
  byEndpoint: Record<string, EndpointStats>;
}

export class StatsRecorder {
  private endpoints = new Map<string, EndpointStats>();
  private waitMs = 0;

  private of(endpoint: string): EndpointStats {
    let s = this.endpoints.get(endpoint);
    if (!s) this.endpoints.set(endpoint, (s = { calls: 0, retries: 0, rateLimited: 0, failed: 0 }));
    return s;
  }

  sent(endpoint: string, attempt: number) {
    const s = this.of(endpoint);
    s.calls++;
    if (attempt > 1) s.retries++;
  }
  rateLimited(endpoint: string) {
    this.of(endpoint).rateLimited++;
  }
  failed(endpoint: string) {
    this.of(endpoint).failed++;
  }
  waited(ms: number) {
    this.waitMs += ms;
  }

  snapshot(): ClientStats {
    const byEndpoint: Record<string, EndpointStats> = {};
    const total = { calls: 0, retries: 0, rateLimited: 0, failed: 0 };
    for (const [endpoint, s] of [...this.endpoints.entries()].sort(([a], [b]) => a.localeCompare(b))) {
      byEndpoint[endpoint] = { ...s };
      total.calls += s.calls;
      total.retries += s.retries;
      total.rateLimited += s.rateLimited;
      total.failed += s.failed;
    }
    return {
      ...total,
      logins: byEndpoint['POST /auth/login']?.calls ?? 0,
      refreshes: byEndpoint['POST /auth/refresh']?.calls ?? 0,
      rateLimitWaitMs: Math.round(this.waitMs),
      byEndpoint,
    };
  }

  reset() {
    this.endpoints.clear();
    this.waitMs = 0;
  }
}
