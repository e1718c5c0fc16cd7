import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { apiBase, ClientConfigError, clientConfigFromEnv, DataPlatformClient } from '../../../src/client/index.js';

const URL_ = 'https://acme.localhost:8443';

describe('clientConfigFromEnv', () => {
  it('reads the API key, CA file and insecure flag', () => {
    expect(clientConfigFromEnv({ DATAPLATFORM_URL: URL_, DATAPLATFORM_API_KEY: 'dpk_x', DATAPLATFORM_CA_FILE: '/ca.pem' })).toMatchObject({
      url: URL_,
      apiKey: 'dpk_x',
      caFile: '/ca.pem',
    });
    for (const v of ['1', 'true', 'YES', 'on'])
      expect(clientConfigFromEnv({ DATAPLATFORM_URL: URL_, DATAPLATFORM_API_KEY: 'k', DATAPLATFORM_INSECURE: v }).insecure).toBe(true);
    for (const v of ['0', 'false', ''])
      expect(clientConfigFromEnv({ DATAPLATFORM_URL: URL_, DATAPLATFORM_API_KEY: 'k', DATAPLATFORM_INSECURE: v }).insecure).toBeUndefined();
  });

  it('reads email and password; overrides win', () => {
    const config = clientConfigFromEnv(
      { DATAPLATFORM_URL: URL_, DATAPLATFORM_EMAIL: 'a@b.c', DATAPLATFORM_PASSWORD: 'pw-123456' },
      { retryPatch: true },
    );
    expect(config).toMatchObject({ email: 'a@b.c', password: 'pw-123456', retryPatch: true });
  });

  it('refuses incomplete or contradictory settings, never echoing a secret', () => {
    const bad: [Record<string, string>, RegExp][] = [
      [{}, /DATAPLATFORM_URL/],
      [{ DATAPLATFORM_URL: URL_ }, /no credentials/],
      [{ DATAPLATFORM_URL: 'http://acme.localhost:8443', DATAPLATFORM_API_KEY: 'dpk_secret_value' }, /https/],
      [{ DATAPLATFORM_URL: 'not a url', DATAPLATFORM_API_KEY: 'dpk_secret_value' }, /valid URL/],
      [
        {
          DATAPLATFORM_URL: URL_,
          DATAPLATFORM_API_KEY: 'dpk_secret_value',
          DATAPLATFORM_EMAIL: 'a@b.c',
          DATAPLATFORM_PASSWORD: 'hunter2-secret',
        },
        /not both/,
      ],
      [{ DATAPLATFORM_URL: URL_, DATAPLATFORM_EMAIL: 'a@b.c' }, /both an email and a password/],
      // The controller's mounted-secret variable, where only the controller reads it: said so.
      [
        { DATAPLATFORM_URL: URL_, DATAPLATFORM_EMAIL: 'a@b.c', DATAPLATFORM_PASSWORD_FILE: '/run/secrets/pw' },
        /^user login needs both an email and a password \(DATAPLATFORM_PASSWORD_FILE is read by dpctl controller only: set DATAPLATFORM_PASSWORD here\)$/,
      ],
      [{ DATAPLATFORM_URL: URL_, DATAPLATFORM_PASSWORD: 'hunter2-secret' }, /both an email and a password/],
      [
        { DATAPLATFORM_URL: URL_, DATAPLATFORM_API_KEY: 'dpk_secret_value', DATAPLATFORM_INSECURE: '1', DATAPLATFORM_CA_FILE: '/ca.pem' },
        /^DATAPLATFORM_CA_FILE and DATAPLATFORM_INSECURE are both set/,
      ],
    ];
    for (const [env, message] of bad) {
      let error: unknown;
      try {
        clientConfigFromEnv(env);
      } catch (e) {
        error = e;
      }
      expect(error, JSON.stringify(env)).toBeInstanceOf(ClientConfigError);
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).not.toMatch(/dpk_secret_value|hunter2-secret/);
    }
  });

  it('the client appends /api/v1 once', () => {
    expect(apiBase('https://acme.localhost:8443')).toBe('https://acme.localhost:8443/api/v1');
    expect(apiBase('https://acme.localhost:8443/')).toBe('https://acme.localhost:8443/api/v1');
    expect(apiBase('https://acme.localhost:8443/api/v1/')).toBe('https://acme.localhost:8443/api/v1');
    expect(apiBase('https://example.com/platform')).toBe('https://example.com/platform/api/v1');
  });

  it('the password is not visible on the client object', () => {
    const client = new DataPlatformClient({ url: URL_, email: 'a@b.c', password: 'hunter2-secret' });
    expect(inspect(client, { depth: 10, showHidden: true })).not.toContain('hunter2-secret');
    expect(JSON.stringify(client)).not.toContain('hunter2-secret');
    return client.close();
  });
});
