import { randomBytes } from 'node:crypto';
import type { CacheProvider, SAML, SamlConfig } from '@node-saml/node-saml';
import { ApiError, invalid, unauthorized, unprocessable } from '../errors.js';
import { samlChecker, type SamlProfile, type SamlSettings } from './saml-worker.js';
import type { SsoProvider } from './provider.js';
import type { VerifiedIdentity } from './oidc.js';

/** Attributes IdPs commonly carry the email in (Okta/Entra/ADFS/Shibboleth), before falling back to an email-shaped NameID. */
const EMAIL_ATTRIBUTES = [
  'email',
  'mail',
  'urn:oid:0.9.2342.19200300.100.1.3',
  'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress',
];

/**
 * node-saml checks InResponseTo through a cache of issued request ids. Ours is the flow row in the
 * database (claimed by RelayState before validation), so the cache only answers for that one id
 * (the checking worker of saml-worker.ts has the same three lines).
 */
function flowCache(requestId: string | null): CacheProvider {
  return {
    saveAsync: async () => null,
    // node-saml reads the value as the request's creation time; the flow row already enforced its 10-minute life.
    getAsync: async (key) => (requestId && key === requestId ? new Date().toISOString() : null),
    removeAsync: async (key) => key,
  };
}

/** node-saml and its XML stack (about 0.2 s to load) are loaded at the first SAML use, not at every start. */
let nodeSaml: Promise<typeof import('@node-saml/node-saml')> | undefined;

/** node-saml's options of a provider, plain data (the checking worker gets them as a message: saml-worker.ts). */
function samlSettings(p: SsoProvider, acsUrl: string): SamlSettings {
  if (!p.saml_sso_url || !p.saml_idp_certificate || !p.saml_entity_id)
    throw unprocessable(`SSO provider "${p.name}" needs saml_sso_url, saml_idp_certificate and saml_entity_id`);
  return {
    entryPoint: p.saml_sso_url,
    issuer: p.saml_entity_id,
    audience: p.saml_entity_id,
    callbackUrl: acsUrl,
    idpCert: p.saml_idp_certificate,
    idpIssuer: p.saml_idp_issuer,
    // The issue asks for signed assertions; a signature on the outer Response alone is not enough.
    wantAssertionsSigned: true,
    wantAuthnResponseSigned: false,
    validateInResponseTo: 'always',
    requestIdExpirationPeriodMs: 10 * 60_000,
    acceptedClockSkewMs: 60_000,
    disableRequestedAuthnContext: true,
  };
}

/** The SAML object that writes requests and metadata (responses are checked in saml-worker.ts). */
async function samlFor(p: SsoProvider, acsUrl: string, requestId: string | null): Promise<SAML> {
  const settings = samlSettings(p, acsUrl);
  const { SAML } = await (nodeSaml ??= import('@node-saml/node-saml'));
  return new SAML({
    ...(settings as unknown as SamlConfig),
    cacheProvider: flowCache(requestId),
    generateUniqueId: () => requestId ?? `_${randomBytes(20).toString('hex')}`,
  });
}

export const newSamlRequestId = () => `_${randomBytes(20).toString('hex')}`;

/** The IdP's SSO URL carrying a deflated AuthnRequest with this id (HTTP-Redirect binding) and the state as RelayState. */
export async function samlLoginUrl(p: SsoProvider, acsUrl: string, requestId: string, relayState: string): Promise<string> {
  return (await samlFor(p, acsUrl, requestId)).getAuthorizeUrlAsync(relayState, undefined, {});
}

/** Service provider metadata (entity id, ACS URL, HTTP-POST binding) for IdPs that import it. */
export async function samlMetadata(p: SsoProvider, acsUrl: string): Promise<string> {
  return (await samlFor(p, acsUrl, null)).generateServiceProviderMetadata(null, null);
}

/**
 * What a SAML response may be before it is parsed. Anyone can start a sign-in and post a response
 * (the RelayState is all it needs), and node-saml's XML stack does work that grows with the square
 * of the elements under one parent (xpath sorts them with xmldom's compareDocumentPosition): one
 * anonymous response of 80 KB of empty sibling elements held the event loop, every tenant's
 * requests, 15-18 s; one of 1 MB, over 18 minutes. Real responses are 5-30 KB with a few hundred
 * tags (a few thousand for an IdP sending many group attributes). Within these bounds a crafted
 * response still costs 40-120 ms: it is checked in a worker thread (saml-worker.ts).
 */
export const SAML_RESPONSE_MAX_BYTES = 128 * 1024;
export const SAML_RESPONSE_MAX_TAGS = 2_000;

function assertPlausibleSize(samlResponse: string): void {
  const xml = Buffer.from(samlResponse, 'base64').toString('utf8');
  if (xml.length > SAML_RESPONSE_MAX_BYTES)
    throw invalid('SAMLResponse', `is ${xml.length} bytes of XML; a SAML response is at most ${SAML_RESPONSE_MAX_BYTES}`);
  let tags = 0;
  for (let i = xml.indexOf('<'); i !== -1; i = xml.indexOf('<', i + 1))
    if (++tags > SAML_RESPONSE_MAX_TAGS)
      throw invalid('SAMLResponse', `has more than ${SAML_RESPONSE_MAX_TAGS} tags; a SAML response has a few hundred`);
}

/** Verifies the posted response: signature with the IdP certificate, audience, validity window and InResponseTo. */
export async function finishSaml(
  p: SsoProvider,
  acsUrl: string,
  requestId: string | null,
  samlResponse: string,
): Promise<VerifiedIdentity> {
  assertPlausibleSize(samlResponse);
  const settings = samlSettings(p, acsUrl);
  let profile: SamlProfile | null;
  try {
    profile = await samlChecker.check(settings, requestId, samlResponse);
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw unauthorized(`SAML sign-in with "${p.name}" failed: ${(err as Error).message}`);
  }
  if (!profile?.nameID) throw unauthorized(`SAML sign-in with "${p.name}" failed: the assertion names no subject`);
  // node-saml compares idpIssuer only on logout messages; the (signed) assertion's Issuer is checked here.
  if (p.saml_idp_issuer && profile.issuer !== p.saml_idp_issuer) {
    throw unauthorized(`SAML sign-in with "${p.name}" failed: unknown issuer "${profile.issuer}", expected "${p.saml_idp_issuer}"`);
  }
  const attribute = EMAIL_ATTRIBUTES.map((name) => profile[name]).find((v): v is string => typeof v === 'string' && v.includes('@'));
  const email = attribute ?? (profile.nameID.includes('@') ? profile.nameID : undefined);
  if (!email)
    throw unauthorized(`SAML sign-in with "${p.name}" failed: the assertion carries no email (an "email" attribute or an email NameID)`);
  return { subject: profile.nameID, email };
}
