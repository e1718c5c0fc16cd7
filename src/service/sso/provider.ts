import type { ServiceContext } from '../context.js';
import type { StoredResource } from '../store/resources.js';
import { ApiError, forbidden, notFound } from '../errors.js';
import type { PermissionLevel } from '../../kinds/index.js';

/** An sso_provider resource with its write-only client secret, as the sign-in code needs it. */
export interface SsoProvider {
  id: string;
  name: string;
  protocol: 'oidc' | 'google' | 'saml';
  enabled: boolean;
  issuer?: string;
  client_id?: string;
  client_secret?: string;
  scopes: string[];
  saml_sso_url?: string;
  saml_idp_certificate?: string;
  saml_entity_id?: string;
  saml_idp_issuer?: string;
  ca_certificate?: string;
  allowed_domains: string[];
  auto_provision: boolean;
  default_role: PermissionLevel;
  updated_at: string;
}

export const GOOGLE_ISSUER = 'https://accounts.google.com';

function fromStored(stored: StoredResource): SsoProvider {
  const data = stored.data as unknown as SsoProvider;
  const secret = stored.secrets?.client_secret;
  return { ...data, client_secret: typeof secret === 'string' ? secret : undefined };
}

/** The enabled provider with this id in the tenant; 404 when absent, 403 when disabled. */
export async function loadProvider(ctx: ServiceContext, tenantId: string, providerId: string): Promise<SsoProvider> {
  const stored = await ctx.resources.get(tenantId, '', 'sso_provider', providerId);
  if (!stored) throw notFound(`SSO provider "${providerId}"`);
  return enabled(fromStored(stored));
}

/** Google sign-in uses the tenant's provider with protocol google (the first created, if several). */
export async function loadGoogleProvider(ctx: ServiceContext, tenantId: string): Promise<SsoProvider> {
  const all = await ctx.resources.allOfKinds(tenantId, '', ['sso_provider']);
  const google = all.map(fromStored).filter((p) => p.protocol === 'google');
  if (!google.length)
    throw new ApiError(
      'resource_not_found',
      'Google sign-in is not configured for this tenant: an admin creates an SSO provider with protocol "google" first',
    );
  return enabled(google.find((p) => p.enabled) ?? google[0]);
}

function enabled(p: SsoProvider): SsoProvider {
  if (!p.enabled) throw forbidden(`SSO provider "${p.name}" is disabled`);
  return p;
}

export function assertProtocol(p: SsoProvider, protocols: SsoProvider['protocol'][], hint: string): void {
  if (!protocols.includes(p.protocol))
    throw new ApiError('validation_error', `SSO provider "${p.name}" uses ${p.protocol}; ${hint}`, [
      { field: 'provider_id', message: `is a ${p.protocol} provider` },
    ]);
}
