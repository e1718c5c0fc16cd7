import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

  it('reads credentials from mounted secret files, which win over the variables; overrides win over both', () => {
    const dir = mkdtempSync(join(tmpdir(), 'dp-client-files-'));
    const file = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    const key = file('key', 'dpk_from_file\n');
    const password = file('password', 'pw-from-file\r\n');
    // A key file is the credential, as --api-key is: the login variables are left aside.
    expect(
      clientConfigFromEnv({
        DATAPLATFORM_URL: URL_,
        DATAPLATFORM_API_KEY_FILE: key,
        DATAPLATFORM_EMAIL: 'a@b.c',
        DATAPLATFORM_PASSWORD: 'pw',
      }),
    ).toMatchObject({ apiKey: 'dpk_from_file', email: undefined, password: undefined });
    expect(clientConfigFromEnv({ DATAPLATFORM_URL: URL_, DATAPLATFORM_API_KEY_FILE: key, DATAPLATFORM_API_KEY: 'dpk_var' }).apiKey).toBe(
      'dpk_from_file',
    );
    expect(
      clientConfigFromEnv({
        DATAPLATFORM_URL: URL_,
        DATAPLATFORM_EMAIL: 'a@b.c',
        DATAPLATFORM_PASSWORD_FILE: password,
        DATAPLATFORM_PASSWORD: 'x',
      }),
    ).toMatchObject({ email: 'a@b.c', password: 'pw-from-file' });
    // An override (a flag, the controller's own --api-key-file) is used and the file not even read.
    expect(
      clientConfigFromEnv({ DATAPLATFORM_URL: URL_, DATAPLATFORM_API_KEY_FILE: join(dir, 'missing') }, { apiKey: 'dpk_flag' }).apiKey,
    ).toBe('dpk_flag');
    const refused = (env: Record<string, string>) => {
      try {
        clientConfigFromEnv({ DATAPLATFORM_URL: URL_, ...env });
      } catch (err) {
        expect(err).toBeInstanceOf(ClientConfigError);
        return (err as Error).message;
      }
      throw new Error('accepted');
    };
    expect(refused({ DATAPLATFORM_API_KEY_FILE: join(dir, 'missing') })).toBe(
      `DATAPLATFORM_API_KEY_FILE ${join(dir, 'missing')}: no such file`,
    );
    expect(refused({ DATAPLATFORM_API_KEY_FILE: file('empty', '\n') })).toBe(`DATAPLATFORM_API_KEY_FILE ${join(dir, 'empty')} is empty`);
    expect(refused({ DATAPLATFORM_EMAIL: 'a@b.c', DATAPLATFORM_PASSWORD_FILE: dir })).toBe(
      `DATAPLATFORM_PASSWORD_FILE ${dir}: it is a directory`,
    );
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
