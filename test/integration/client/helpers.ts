import { DataPlatformClient, type ClientConfig } from '../../../src/client/index.js';
import type { TestService, TestTenant } from '../../support/service.js';

/** `https://<slug>.localhost:<port>`: the client appends /api/v1 itself. */
export const tenantUrl = (svc: TestService, t: TestTenant | string, port = svc.port) =>
  `https://${typeof t === 'string' ? t : t.slug}.localhost:${port}`;

/** A client of the tenant trusting the service's local CA; logs in as the tenant admin unless told otherwise. */
export function clientFor(svc: TestService, t: TestTenant, config: Partial<ClientConfig> = {}): DataPlatformClient {
  const auth: Partial<ClientConfig> = config.apiKey ? {} : { email: t.adminEmail, password: t.adminPassword };
  return new DataPlatformClient({ url: tenantUrl(svc, t), caFile: svc.service.tls.certPath, ...auth, ...config });
}

/** Fast retries, so fault tests do not wait for production backoff. */
export const FAST_RETRY = { retries: 4, minTimeoutMs: 5, maxTimeoutMs: 20, maxElapsedMs: 10_000 };

export { FaultProxy, type Fault, type SeenRequest } from '../../support/fault-proxy.js';
