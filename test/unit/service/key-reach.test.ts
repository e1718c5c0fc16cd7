import { describe, expect, test } from 'vitest';
import { assertKeyMayReach } from '../../../src/service/auth/key-reach.js';
import type { Actor } from '../../../src/service/auth/actor.js';

const key: Actor = { type: 'api_key', id: 'key_1', name: 'ci', tenantId: 'ten_1', level: 'admin', projectId: 'prj_a' };
const user: Actor = { type: 'user', id: 'usr_1', name: 'a@example.com', tenantId: 'ten_1', level: 'read-only' };
const code = (fn: () => void) => {
  try {
    fn();
    return 'allowed';
  } catch (err) {
    return `${(err as { code: string }).code}: ${(err as Error).message}`;
  }
};

describe('what an API key may reach', () => {
  test('routes that do not say, or say never, are closed to keys (even admin ones), open to users', () => {
    expect(code(() => assertKeyMayReach(key, undefined, { method: 'GET', url: '/api/v1/users', params: {} }))).toBe(
      'forbidden: API keys are limited to their project; reading users needs a user token',
    );
    expect(code(() => assertKeyMayReach(key, 'never', { method: 'POST', url: '/api/v1/users', params: {} }))).toBe(
      'forbidden: API keys are limited to their project; creating users needs a user token',
    );
    expect(
      code(() =>
        assertKeyMayReach(key, 'never', { method: 'DELETE', url: '/api/v1/sso-providers/:resourceId', params: { resourceId: 'sso_1' } }),
      ),
    ).toMatch(/deleting sso-providers/);
    expect(code(() => assertKeyMayReach(user, undefined, { method: 'GET', url: '/api/v1/users', params: {} }))).toBe('allowed');
  });

  test('own-project: its project, or the unprefixed paths; another project is not found', () => {
    expect(
      code(() => assertKeyMayReach(key, 'own-project', { method: 'GET', url: '/api/v1/projects/:id/connectors', params: { id: 'prj_a' } })),
    ).toBe('allowed');
    expect(code(() => assertKeyMayReach(key, 'own-project', { method: 'GET', url: '/api/v1/connectors', params: {} }))).toBe('allowed');
    expect(
      code(() => assertKeyMayReach(key, 'own-project', { method: 'GET', url: '/api/v1/projects/:id/connectors', params: { id: 'prj_b' } })),
    ).toBe('resource_not_found: Project not found');
    expect(
      code(() =>
        assertKeyMayReach(user, 'own-project', { method: 'GET', url: '/api/v1/projects/:id/connectors', params: { id: 'prj_b' } }),
      ),
    ).toBe('allowed');
  });
});
