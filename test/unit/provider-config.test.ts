import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ClientConfigError, DataPlatformClient } from '../../src/client/index.js';
import { providerClientConfig, providerConfigConflicts, providerImplementation } from '../../src/provider/provider.js';
import { encodeDynamic, UNKNOWN, type TfObject } from '../../src/provider/values.js';

/**
 * The provider block (as Terraform sends it: every attribute present, null when not set) and the
 * DATAPLATFORM_* fallbacks, as `providerClientConfig` maps them onto the client's configuration.
 */
const URL_A = 'https://block.localhost:8443';
const URL_B = 'https://env.localhost:8443';

const block = (
  set: Partial<Record<'endpoint' | 'api_key' | 'email' | 'password' | 'ca_file', string | null>> & { insecure?: boolean | null } = {},
): TfObject => ({
  endpoint: null,
  api_key: null,
  email: null,
  password: null,
  ca_file: null,
  insecure: null,
  ...set,
});

const ENV_ALL = {
  DATAPLATFORM_URL: URL_B,
  DATAPLATFORM_API_KEY: 'dpk_env',
  DATAPLATFORM_EMAIL: 'env@example.com',
  DATAPLATFORM_PASSWORD: 'env-password',
  DATAPLATFORM_CA_FILE: '/env/ca.pem',
  DATAPLATFORM_INSECURE: '1',
};

/** Every credential variable, and trust from the environment that does not contradict itself. */
const ENV_CREDENTIALS = { ...ENV_ALL, DATAPLATFORM_INSECURE: '' };

/** The settings that matter (userAgent is fixed). */
const pick = (c: ReturnType<typeof providerClientConfig>) => ({
  url: c.url,
  apiKey: c.apiKey,
  email: c.email,
  password: c.password,
  caFile: c.caFile,
  insecure: c.insecure,
});

const thrown = (fn: () => unknown): Error => {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  throw new Error('did not throw');
};

describe('provider block attributes and DATAPLATFORM_* variables', () => {
  it('takes every setting from the block when it is there, whatever the environment says', () => {
    const c = providerClientConfig(block({ endpoint: URL_A, api_key: 'dpk_block', ca_file: '/block/ca.pem', insecure: false }), ENV_ALL);
    // insecure = false in the block wins over DATAPLATFORM_INSECURE=1.
    expect(pick(c)).toEqual({
      url: URL_A,
      apiKey: 'dpk_block',
      email: undefined,
      password: undefined,
      caFile: '/block/ca.pem',
      insecure: undefined,
    });
    expect(c.userAgent).toBe('terraform-provider-dataplatform');
    const user = providerClientConfig(
      block({ endpoint: URL_A, email: 'block@example.com', password: 'block-password', ca_file: '/block/ca.pem', insecure: false }),
      ENV_ALL,
    );
    expect(pick(user)).toEqual({
      url: URL_A,
      apiKey: undefined,
      email: 'block@example.com',
      password: 'block-password',
      caFile: '/block/ca.pem',
      insecure: undefined,
    });
  });

  it('falls back to each variable for each attribute left out (null block and all-null block alike)', () => {
    for (const config of [null, block()]) {
      expect(
        pick(
          providerClientConfig(config, { DATAPLATFORM_URL: URL_B, DATAPLATFORM_API_KEY: 'dpk_env', DATAPLATFORM_CA_FILE: '/env/ca.pem' }),
        ),
      ).toEqual({
        url: URL_B,
        apiKey: 'dpk_env',
        email: undefined,
        password: undefined,
        caFile: '/env/ca.pem',
        insecure: undefined,
      });
      expect(
        pick(
          providerClientConfig(config, {
            DATAPLATFORM_URL: URL_B,
            DATAPLATFORM_EMAIL: 'env@example.com',
            DATAPLATFORM_PASSWORD: 'env-password',
            DATAPLATFORM_INSECURE: 'true',
          }),
        ),
      ).toEqual({
        url: URL_B,
        apiKey: undefined,
        email: 'env@example.com',
        password: 'env-password',
        caFile: undefined,
        insecure: true,
      });
    }
    // One attribute at a time: the others still come from the environment.
    const env = { DATAPLATFORM_URL: URL_B, DATAPLATFORM_API_KEY: 'dpk_env', DATAPLATFORM_CA_FILE: '/env/ca.pem' };
    expect(pick(providerClientConfig(block({ endpoint: URL_A }), env))).toMatchObject({
      url: URL_A,
      apiKey: 'dpk_env',
      caFile: '/env/ca.pem',
    });
    expect(pick(providerClientConfig(block({ ca_file: '/block/ca.pem' }), env))).toMatchObject({
      url: URL_B,
      apiKey: 'dpk_env',
      caFile: '/block/ca.pem',
    });
    expect(pick(providerClientConfig(block({ api_key: 'dpk_block' }), env))).toMatchObject({
      url: URL_B,
      apiKey: 'dpk_block',
      caFile: '/env/ca.pem',
    });
  });

  it('treats empty and blank strings, in the block or the environment, as not set', () => {
    const c = providerClientConfig(block({ endpoint: '', api_key: '  ', ca_file: '' }), {
      DATAPLATFORM_URL: URL_B,
      DATAPLATFORM_API_KEY: '',
      DATAPLATFORM_EMAIL: 'env@example.com',
      DATAPLATFORM_PASSWORD: 'env-password',
      DATAPLATFORM_CA_FILE: ' ',
    });
    expect(pick(c)).toEqual({
      url: URL_B,
      apiKey: undefined,
      email: 'env@example.com',
      password: 'env-password',
      caFile: undefined,
      insecure: undefined,
    });
  });

  describe('credentials come as a whole from one place', () => {
    it('an api_key in the block wins over an email in the block and over every variable', () => {
      const c = providerClientConfig(
        block({ api_key: 'dpk_block', email: 'block@example.com', password: 'block-password' }),
        ENV_CREDENTIALS,
      );
      expect(pick(c)).toMatchObject({ apiKey: 'dpk_block', email: undefined, password: undefined });
    });

    it('an email in the block wins over DATAPLATFORM_API_KEY; its password falls back to DATAPLATFORM_PASSWORD', () => {
      expect(pick(providerClientConfig(block({ email: 'block@example.com' }), ENV_CREDENTIALS))).toMatchObject({
        apiKey: undefined,
        email: 'block@example.com',
        password: 'env-password',
      });
      expect(pick(providerClientConfig(block({ email: 'block@example.com', password: 'block-password' }), ENV_CREDENTIALS))).toMatchObject({
        apiKey: undefined,
        email: 'block@example.com',
        password: 'block-password',
      });
    });

    it('with nothing in the block, DATAPLATFORM_API_KEY wins over DATAPLATFORM_EMAIL (the plain client refuses both)', () => {
      expect(pick(providerClientConfig(null, ENV_CREDENTIALS))).toMatchObject({ apiKey: 'dpk_env', email: undefined, password: undefined });
    });

    it('a password in the block goes with DATAPLATFORM_EMAIL, and is unused under DATAPLATFORM_API_KEY', () => {
      expect(
        pick(
          providerClientConfig(block({ password: 'block-password' }), {
            DATAPLATFORM_URL: URL_B,
            DATAPLATFORM_EMAIL: 'env@example.com',
            DATAPLATFORM_PASSWORD: 'env-password',
          }),
        ),
      ).toMatchObject({
        apiKey: undefined,
        email: 'env@example.com',
        password: 'block-password',
      });
      expect(
        pick(providerClientConfig(block({ password: 'block-password' }), { DATAPLATFORM_URL: URL_B, DATAPLATFORM_API_KEY: 'dpk_env' })),
      ).toMatchObject({ apiKey: 'dpk_env', email: undefined, password: undefined });
    });

    it("never hands the client both an API key and a login; an incomplete login is the client's error", () => {
      const combos: [TfObject | null, NodeJS.ProcessEnv][] = [
        [block({ api_key: 'dpk_block', email: 'block@example.com', password: 'block-password' }), ENV_ALL],
        [block({ email: 'block@example.com' }), ENV_ALL],
        [null, ENV_ALL],
        [block({ password: 'block-password' }), ENV_ALL],
      ];
      for (const [config, env] of combos) {
        const c = providerClientConfig(config, { ...env, DATAPLATFORM_INSECURE: '', DATAPLATFORM_CA_FILE: '' });
        expect(c.apiKey !== undefined && (c.email !== undefined || c.password !== undefined), JSON.stringify(config)).toBe(false);
        expect(() => new DataPlatformClient(c)).not.toThrow();
      }
      const noPassword = providerClientConfig(block({ email: 'block@example.com' }), {
        DATAPLATFORM_URL: URL_B,
        DATAPLATFORM_API_KEY: 'dpk_env',
      });
      expect(thrown(() => new DataPlatformClient(noPassword))).toMatchObject({
        message: expect.stringMatching(/user login needs both an email and a password/),
      });
      const noEmail = providerClientConfig(block({ password: 'block-password' }), { DATAPLATFORM_URL: URL_B });
      expect(thrown(() => new DataPlatformClient(noEmail)).message).toMatch(/user login needs both an email and a password/);
      expect(thrown(() => new DataPlatformClient(noEmail)).message).not.toContain('block-password');
    });
  });

  describe('mounted secret files (DATAPLATFORM_API_KEY_FILE, DATAPLATFORM_PASSWORD_FILE), as dpctl reads them', () => {
    let dir: string;
    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'provider-secret-files-'));
      writeFileSync(join(dir, 'key'), 'dpk_file\n');
      writeFileSync(join(dir, 'password'), 'file password\n');
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it('with nothing in the block, a key file wins over DATAPLATFORM_API_KEY and over the login variables', () => {
      const c = providerClientConfig(null, { ...ENV_CREDENTIALS, DATAPLATFORM_API_KEY_FILE: join(dir, 'key') });
      expect(pick(c)).toMatchObject({ apiKey: 'dpk_file', email: undefined, password: undefined });
    });

    it('a password file wins over DATAPLATFORM_PASSWORD, for an email in the block or in DATAPLATFORM_EMAIL', () => {
      const env = { DATAPLATFORM_URL: URL_B, DATAPLATFORM_EMAIL: 'env@example.com', DATAPLATFORM_PASSWORD: 'env-password' };
      const files = { ...env, DATAPLATFORM_PASSWORD_FILE: join(dir, 'password') };
      expect(pick(providerClientConfig(null, files))).toMatchObject({ email: 'env@example.com', password: 'file password' });
      expect(pick(providerClientConfig(block({ email: 'block@example.com' }), files))).toMatchObject({
        email: 'block@example.com',
        password: 'file password',
      });
      // The block still wins over the files.
      expect(pick(providerClientConfig(block({ password: 'block-password' }), files))).toMatchObject({ password: 'block-password' });
      expect(
        pick(providerClientConfig(block({ api_key: 'dpk_block' }), { ...files, DATAPLATFORM_API_KEY_FILE: join(dir, 'key') })),
      ).toMatchObject({
        apiKey: 'dpk_block',
      });
    });

    it('a file that is missing or empty is named, never read past; the block does not read the file it overrides', () => {
      writeFileSync(join(dir, 'empty'), '\n');
      const missing = join(dir, 'nope');
      expect(thrown(() => providerClientConfig(null, { DATAPLATFORM_URL: URL_B, DATAPLATFORM_API_KEY_FILE: missing })).message).toBe(
        `DATAPLATFORM_API_KEY_FILE ${missing}: no such file`,
      );
      expect(
        thrown(() =>
          providerClientConfig(null, {
            DATAPLATFORM_URL: URL_B,
            DATAPLATFORM_EMAIL: 'e@example.com',
            DATAPLATFORM_PASSWORD_FILE: join(dir, 'empty'),
          }),
        ).message,
      ).toBe(`DATAPLATFORM_PASSWORD_FILE ${join(dir, 'empty')} is empty`);
      expect(() =>
        providerClientConfig(block({ api_key: 'dpk_block' }), { DATAPLATFORM_URL: URL_B, DATAPLATFORM_API_KEY_FILE: missing }),
      ).not.toThrow();
    });
  });

  describe('insecure', () => {
    it('a bool in the block wins; otherwise DATAPLATFORM_INSECURE read as 1/true/yes/on', () => {
      const env = { DATAPLATFORM_URL: URL_B, DATAPLATFORM_API_KEY: 'dpk_env' };
      expect(providerClientConfig(block({ insecure: true }), env).insecure).toBe(true);
      expect(providerClientConfig(block({ insecure: true }), { ...env, DATAPLATFORM_INSECURE: '0' }).insecure).toBe(true);
      expect(providerClientConfig(block({ insecure: false }), { ...env, DATAPLATFORM_INSECURE: '1' }).insecure).toBeUndefined();
      for (const v of ['1', 'true', 'YES', 'on', ' on '])
        expect(providerClientConfig(block(), { ...env, DATAPLATFORM_INSECURE: v }).insecure, v).toBe(true);
      for (const v of ['0', 'false', 'no', '', 'maybe'])
        expect(providerClientConfig(block(), { ...env, DATAPLATFORM_INSECURE: v }).insecure, v).toBeUndefined();
      expect(() => new DataPlatformClient(providerClientConfig(block({ insecure: true }), env))).not.toThrow();
    });

    it('and a CA file: trust comes as a whole from the block when it says anything, else from the environment', () => {
      const env = { DATAPLATFORM_URL: URL_B, DATAPLATFORM_API_KEY: 'dpk_env' };
      // The quickstarts export DATAPLATFORM_CA_FILE; a block that says insecure = true means it.
      const insecure = providerClientConfig(block({ insecure: true }), { ...env, DATAPLATFORM_CA_FILE: '/env/ca.pem' });
      expect(pick(insecure)).toMatchObject({ insecure: true, caFile: undefined });
      expect(() => new DataPlatformClient(insecure)).not.toThrow();
      const ca = providerClientConfig(block({ ca_file: '/block/ca.pem' }), { ...env, DATAPLATFORM_INSECURE: '1' });
      expect(pick(ca)).toMatchObject({ insecure: undefined, caFile: '/block/ca.pem' });
      // Both in one place: refused, naming that place.
      expect(thrown(() => providerClientConfig(block({ insecure: true, ca_file: '/block/ca.pem' }), env)).message).toBe(
        'give either ca_file or insecure = true in the provider block, not both',
      );
      expect(
        thrown(() => providerClientConfig(block(), { ...env, DATAPLATFORM_CA_FILE: '/env/ca.pem', DATAPLATFORM_INSECURE: '1' })).message,
      ).toBe(
        'DATAPLATFORM_CA_FILE and DATAPLATFORM_INSECURE are both set: unset one, or say which in the provider block (ca_file, or insecure = true)',
      );
      // insecure = false in the block turns the variable off, and keeps the environment's CA.
      expect(
        pick(providerClientConfig(block({ insecure: false }), { ...env, DATAPLATFORM_CA_FILE: '/env/ca.pem', DATAPLATFORM_INSECURE: '1' })),
      ).toMatchObject({ insecure: undefined, caFile: '/env/ca.pem' });
    });
  });

  describe('nothing configured', () => {
    it('no endpoint: names the attribute and the variable', () => {
      const err = thrown(() => providerClientConfig(null, {}));
      expect(err).toBeInstanceOf(ClientConfigError);
      expect(err.message).toBe('endpoint is not set (provider block or DATAPLATFORM_URL), e.g. https://acme.localhost:8443');
      expect(thrown(() => providerClientConfig(block({ api_key: 'dpk_block' }), { DATAPLATFORM_API_KEY: 'dpk_env' })).message).toMatch(
        /^endpoint is not set/,
      );
    });

    it('an endpoint but no credentials: the client says which to give', () => {
      const err = thrown(() => new DataPlatformClient(providerClientConfig(block({ endpoint: URL_A }), {})));
      expect(err).toBeInstanceOf(ClientConfigError);
      expect(err.message).toMatch(/^no credentials: give an API key \(DATAPLATFORM_API_KEY\) or an email and password/);
    });

    describe('through ConfigureProvider', () => {
      afterEach(() => vi.unstubAllEnvs());

      const rpc = (
        impl: ReturnType<typeof providerImplementation>,
        method: keyof ReturnType<typeof providerImplementation>,
        request: unknown,
      ) =>
        new Promise<any>((resolve, reject) =>
          (impl[method] as any)({ request }, (err: unknown, res: unknown) => (err ? reject(err) : resolve(res))),
        );

      it('answers an error diagnostic, and every later call repeats it', async () => {
        for (const name of Object.keys(ENV_ALL)) vi.stubEnv(name, '');
        const impl = providerImplementation(() => undefined);
        const configured = await rpc(impl, 'ConfigureProvider', { config: encodeDynamic(block()) });
        expect(configured.diagnostics).toEqual([
          {
            severity: 1,
            summary: 'invalid provider configuration',
            detail: 'endpoint is not set (provider block or DATAPLATFORM_URL), e.g. https://acme.localhost:8443',
          },
        ]);
        const read = await rpc(impl, 'ReadResource', {
          type_name: 'dataplatform_project',
          current_state: encodeDynamic({ id: 'prj_1', name: 'x' }),
        });
        expect(read.diagnostics).toEqual([
          expect.objectContaining({ severity: 1, summary: expect.stringMatching(/^endpoint is not set/) }),
        ]);
      });

      it('reads the environment for what the block leaves out', async () => {
        for (const name of Object.keys(ENV_ALL)) vi.stubEnv(name, '');
        vi.stubEnv('DATAPLATFORM_URL', URL_B);
        const impl = providerImplementation(() => undefined);
        const noCredentials = await rpc(impl, 'ConfigureProvider', { config: encodeDynamic(block()) });
        expect(noCredentials.diagnostics).toEqual([
          expect.objectContaining({ summary: 'invalid provider configuration', detail: expect.stringMatching(/^no credentials/) }),
        ]);
        vi.stubEnv('DATAPLATFORM_API_KEY', 'dpk_env');
        // (No service at URL_B: the credentials are not checked here; test/e2e/provider/provider-config.test.ts checks them.)
        expect(
          (
            await rpc(
              providerImplementation(() => undefined),
              'ConfigureProvider',
              { config: encodeDynamic({ ...block(), skip_credentials_validation: true }) },
            )
          ).diagnostics,
        ).toEqual([]);
      });
    });
  });
});

describe('providerConfigConflicts (ValidateProviderConfig)', () => {
  it('names each attribute that contradicts another one in the block', () => {
    expect(
      providerConfigConflicts(block({ api_key: 'dpk_block', email: 'a@example.com', password: 'pw' })).map((c) => c.attribute),
    ).toEqual(['email', 'password']);
    expect(providerConfigConflicts(block({ ca_file: '/ca.pem', insecure: true })).map((c) => c.attribute)).toEqual(['insecure']);
  });

  it('leaves alone what the block does not set twice: one credential, blanks, unknowns, insecure = false, the environment', () => {
    for (const config of [
      null,
      block({ api_key: 'dpk_block' }),
      block({ email: 'a@example.com', password: 'pw' }),
      block({ api_key: ' ', email: 'a@example.com' }),
      block({ ca_file: '/ca.pem', insecure: false }),
      { ...block({ email: 'a@example.com' }), api_key: UNKNOWN } as TfObject,
    ])
      expect(providerConfigConflicts(config), JSON.stringify(config)).toEqual([]);
  });

  it('never repeats a value in its messages', () => {
    const text = JSON.stringify(providerConfigConflicts(block({ api_key: 'dpk_secret_value', password: 'secret-password' })));
    expect(text).not.toContain('dpk_secret_value');
    expect(text).not.toContain('secret-password');
  });
});
