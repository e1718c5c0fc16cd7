import { describe, expect, it } from 'vitest';
import { rateLimitNotices } from '../../../src/client/options.js';

/** What dpctl says on stderr (the controller: in its log) while calls wait for the rate limit: once per pause, and why. */
describe('rateLimitNotices', () => {
  it('says each pause once, with how long and why; other events say nothing', () => {
    const lines: string[] = [];
    const notice = rateLimitNotices((line) => lines.push(line));
    const until = Date.now() + 53_000;
    const endpoint = 'GET /projects/{id}/connectors';
    notice({ type: 'rate_limit_reserve', endpoint, remaining: 6, limit: 30, until });
    // Calls in flight report the same pause again.
    notice({ type: 'rate_limit_reserve', endpoint, remaining: 5, limit: 30, until: until + 20 });
    notice({ type: 'response', method: 'GET', route: '/projects', url: 'https://x', status: 200, attempt: 1, durationMs: 3 });
    notice({ type: 'rate_limited', endpoint: 'POST /projects/{id}/connectors', retryAfterMs: 3_000, until: Date.now() + 3_000 });
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      /^waiting (52|53) s for GET \/projects\/\{id\}\/connectors: 6 of its 30 calls a minute are left, kept for the tenant's other callers$/,
    );
    expect(lines[1]).toMatch(
      /^waiting [23] s: the service's rate limit of POST \/projects\/\{id\}\/connectors is spent for this minute \(429, Retry-After\)$/,
    );
    // The next pause of the same endpoint is said again.
    notice({ type: 'rate_limit_reserve', endpoint, remaining: 6, limit: 30, until: until + 60_000 });
    expect(lines).toHaveLength(3);
  });
});
