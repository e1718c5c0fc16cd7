import { expect } from 'vitest';
import type { HttpResponse } from '../../support/http.js';

export type Level = 'read-only' | 'read-write' | 'admin';
export const LEVELS: Level[] = ['read-only', 'read-write', 'admin'];

export const requestIdOf = (res: HttpResponse) => {
  const id = res.headers['x-request-id'];
  expect(typeof id, `X-Request-Id missing on ${res.status} ${res.text}`).toBe('string');
  expect(id as string).not.toBe('');
  return id as string;
};

/** The spec's error envelope (section 7): exactly { error: { code, message } }, plus a request id. */
export function expectError(res: HttpResponse, status: number, code: string, message?: RegExp) {
  expect(res.status, res.text).toBe(status);
  expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
  expect(Object.keys(res.body ?? {}), res.text).toEqual(['error']);
  const keys = Object.keys(res.body.error).sort();
  expect(keys, res.text).toEqual(code === 'validation_error' ? ['code', 'details', 'message'] : ['code', 'message']);
  expect(res.body.error.code).toBe(code);
  expect(typeof res.body.error.message).toBe('string');
  expect(res.body.error.message.length).toBeGreaterThan(0);
  if (message) expect(res.body.error.message).toMatch(message);
  requestIdOf(res);
}

/** A token response exactly as section 2 describes it. */
export function expectTokenResponse(body: Record<string, unknown>, expiresIn = 3600) {
  expect(Object.keys(body).sort()).toEqual(['access_token', 'expires_in', 'refresh_token', 'token_type']);
  expect(body.token_type).toBe('Bearer');
  expect(body.expires_in).toBe(expiresIn);
  expect(typeof body.access_token).toBe('string');
  expect(typeof body.refresh_token).toBe('string');
  expect((body.access_token as string).length).toBeGreaterThanOrEqual(32);
  expect((body.refresh_token as string).length).toBeGreaterThanOrEqual(32);
  expect(body.access_token).not.toBe(body.refresh_token);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const connectorBody = (name: string) => ({
  name,
  connector_type: 'postgresql',
  config: { host: 'db', port: 5432 },
  credentials: { username: 'u', password: 'conn-password-1' },
});
