import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientConfigError, DataPlatformClient, NetworkError, clientConfigFromEnv } from '../../../src/client/index.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { tenantUrl } from './helpers.js';

/** TLS against the service's local CA, `<tenant>.localhost` names, and configuration from the environment. */
let svc: TestService;
let t: TestTenant;
let apiKey: string;
let projectId: string;

beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  projectId = (await svc.project(t, 'tls')).id;
  apiKey = (await svc.apiKey(t, projectId, 'read-only')).key;
});
afterAll(() => svc?.close());

async function projectNames(client: DataPlatformClient) {
  try {
    return (await client.projects.listAll()).map((p) => p.name);
  } finally {
    await client.close();
  }
}

describe('TLS and *.localhost', () => {
  it('reaches https://<tenant>.localhost:<port> with no /etc/hosts entry, trusting the CA file', async () => {
    const url = tenantUrl(svc, t);
    expect(new URL(url).hostname).toBe(`${t.slug}.localhost`);
    expect(await projectNames(new DataPlatformClient({ url, apiKey, caFile: svc.service.tls.certPath }))).toEqual(['tls']);
  });

  it('takes the CA as PEM text too', async () => {
    expect(
      await projectNames(new DataPlatformClient({ url: tenantUrl(svc, t), apiKey, ca: readFileSync(svc.service.tls.certPath, 'utf8') })),
    ).toEqual(['tls']);
  });

  it('refuses the self-signed chain without the CA: a NetworkError with the URL, not retried', async () => {
    const client = new DataPlatformClient({ url: tenantUrl(svc, t), apiKey });
    try {
      const err = (await client.projects.list().catch((e: unknown) => e)) as NetworkError;
      expect(err).toBeInstanceOf(NetworkError);
      expect(err.code).toMatch(/UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT/);
      expect(err.message).toContain(`https://${t.slug}.localhost:${svc.port}/api/v1/projects`);
      expect(err.message).not.toContain(apiKey);
      expect(client.stats().calls).toBe(1);
    } finally {
      await client.close();
    }
  });

  it('a create refused by certificate verification is a plain NetworkError: nothing was sent, nothing is ambiguous', async () => {
    const client = new DataPlatformClient({ url: tenantUrl(svc, t), apiKey });
    try {
      const err = await client
        .resources('connector', { projectId })
        .create({ name: 'never-sent', connector_type: 'mysql' })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NetworkError);
      expect(client.stats().calls).toBe(1);
    } finally {
      await client.close();
    }
  });

  it('insecure: true skips verification (explicitly, for throwaway setups)', async () => {
    expect(await projectNames(new DataPlatformClient({ url: tenantUrl(svc, t), apiKey, insecure: true }))).toEqual(['tls']);
  });

  it('an unreadable CA file is a ClientConfigError at construction', () => {
    expect(() => new DataPlatformClient({ url: tenantUrl(svc, t), apiKey, caFile: '/nonexistent/ca.pem' })).toThrow(ClientConfigError);
  });
});

describe('configuration from DATAPLATFORM_* variables', () => {
  it('API key, CA file and a URL without /api/v1', async () => {
    const env = { DATAPLATFORM_URL: tenantUrl(svc, t), DATAPLATFORM_API_KEY: apiKey, DATAPLATFORM_CA_FILE: svc.service.tls.certPath };
    const client = DataPlatformClient.fromEnv(env);
    expect(client.baseUrl).toBe(`${tenantUrl(svc, t)}/api/v1`);
    expect(await projectNames(client)).toEqual(['tls']);
  });

  it('email and password, insecure, and a URL that already ends with /api/v1', async () => {
    const env = {
      DATAPLATFORM_URL: `${tenantUrl(svc, t)}/api/v1/`,
      DATAPLATFORM_EMAIL: t.adminEmail,
      DATAPLATFORM_PASSWORD: t.adminPassword,
      DATAPLATFORM_INSECURE: '1',
    };
    const config = clientConfigFromEnv(env);
    expect(config).toMatchObject({ email: t.adminEmail, insecure: true });
    const client = new DataPlatformClient(config);
    expect(client.baseUrl).toBe(`${tenantUrl(svc, t)}/api/v1`);
    expect(await projectNames(client)).toEqual(['tls']);
  });
});
