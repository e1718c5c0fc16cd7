import { describe, expect, it } from 'vitest';
import { IDP_ANSWER_MAX_BYTES, boundedAnswer } from '../../../src/service/sso/oidc.js';

/** A body streamed in 64 KiB chunks, counting how many were pulled (a refused answer is not read to its end). */
function streamed(total: number) {
  let pulled = 0;
  const chunk = new Uint8Array(64 * 1024).fill(0x61);
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (pulled * chunk.byteLength >= total) return controller.close();
      pulled++;
      controller.enqueue(chunk);
    },
  });
  return { body, pulled: () => pulled };
}

describe("an identity provider's answers are bounded (a tenant admin chooses the IdP; anonymous sign-ins fetch from it)", () => {
  it('refuses a declared length over the bound without reading the body', async () => {
    const s = streamed(300 * 1024 * 1024);
    const res = new Response(s.body, { headers: { 'content-length': String(300 * 1024 * 1024) } });
    await expect(boundedAnswer(res, 'https://idp.example/.well-known/openid-configuration')).rejects.toThrow(
      `the answer of https://idp.example/.well-known/openid-configuration is 314572800 bytes; an identity provider's is at most ${IDP_ANSWER_MAX_BYTES}`,
    );
    expect(s.pulled()).toBeLessThanOrEqual(1);
  });

  it('refuses a streamed body once it passes the bound, without reading the rest', async () => {
    const s = streamed(300 * 1024 * 1024);
    await expect(boundedAnswer(new Response(s.body), 'https://idp.example/jwks')).rejects.toThrow(/is over 262144 bytes/);
    expect(s.pulled() * 64 * 1024).toBeLessThanOrEqual(IDP_ANSWER_MAX_BYTES + 2 * 64 * 1024);
  });

  it('passes an answer within the bound unchanged: status, headers, body', async () => {
    const doc = JSON.stringify({ issuer: 'https://idp.example', jwks_uri: 'https://idp.example/jwks' });
    const res = await boundedAnswer(
      new Response(doc, { status: 200, headers: { 'content-type': 'application/json', 'cache-control': 'max-age=60' } }),
      'https://idp.example',
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('max-age=60');
    expect(await res.json()).toEqual(JSON.parse(doc));
    expect((await boundedAnswer(new Response(null, { status: 204 }), 'https://idp.example/x')).status).toBe(204);
  });
});
