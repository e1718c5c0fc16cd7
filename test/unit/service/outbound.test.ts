import { describe, expect, it } from 'vitest';
import { EgressPolicy } from '../../../src/service/egress.js';
import { MAX_AGENTS, outboundAgent } from '../../../src/service/outbound.js';

/** A distinct CA text per n: the agent cache keys on the PEM text, it does not parse it. */
const pem = (n: number) => `-----BEGIN CERTIFICATE-----\nCA${n}\n-----END CERTIFICATE-----`;

describe('outbound agents: one per set of extra CAs, bounded', () => {
  it('the same CAs get the same agent; other CAs another', () => {
    const egress = new EgressPolicy();
    const a = outboundAgent(egress, { caPems: [pem(1)] });
    expect(outboundAgent(egress, { caPems: [pem(1)] })).toBe(a);
    expect(outboundAgent(egress, { caPems: [pem(2)] })).not.toBe(a);
    expect(outboundAgent(egress)).toBe(outboundAgent(egress, { caPems: [undefined] }));
  });

  it('keeps the agents used last: a tenant changing its SSO CA over and over does not grow memory without bound', () => {
    const egress = new EgressPolicy();
    const first = outboundAgent(egress, { caPems: [pem(0)] });
    const busy = outboundAgent(egress, { caPems: [pem(-1)] });
    for (let n = 1; n <= MAX_AGENTS * 3; n++) {
      outboundAgent(egress, { caPems: [pem(n)] });
      if (n % 10 === 0) expect(outboundAgent(egress, { caPems: [pem(-1)] })).toBe(busy); // used again and again: kept
    }
    // Not used for MAX_AGENTS * 3 other CAs: dropped, and built anew when its provider comes back.
    expect(outboundAgent(egress, { caPems: [pem(0)] })).not.toBe(first);
    // The last MAX_AGENTS - 1 others are still kept (with `busy`).
    const recent = outboundAgent(egress, { caPems: [pem(MAX_AGENTS * 3)] });
    expect(outboundAgent(egress, { caPems: [pem(MAX_AGENTS * 3)] })).toBe(recent);
  });
});
