import { describe, expect, it } from 'vitest';
import { decodePrivate, encodePrivate } from '../../src/provider/private-state.js';

describe("the provider's private state", () => {
  it('keeps a failed connection test across runs, and nothing else', () => {
    expect(decodePrivate(encodePrivate({ setupTestFailed: true }))).toEqual({ setupTestFailed: true });
    expect(encodePrivate({})).toHaveLength(0);
    expect(decodePrivate(encodePrivate({}))).toEqual({});
  });

  it("reads anything else (none, another provider version's bytes, garbage) as nothing remembered", () => {
    for (const bytes of [
      undefined,
      null,
      new Uint8Array(0),
      Buffer.from('not json'),
      Buffer.from('{"setupTestFailed":"yes"}'),
      Buffer.from('[]'),
      'text',
    ])
      expect(decodePrivate(bytes)).toEqual({});
  });
});
