import { createHash } from 'node:crypto';
import * as oidc from 'openid-client';
import { fetch as undiciFetch, type Agent } from 'undici';
import { outboundAgent } from '../outbound.js';
import { EgressPolicy } from '../egress.js';
import { ApiError, unauthorized, unprocessable } from '../errors.js';
import { GOOGLE_ISSUER, type SsoProvider } from './provider.js';
import { DiscoveryCache } from './discovery-cache.js';

/** What the callback proved: who signed in, by the IdP's subject and the email it vouches for. */
export interface VerifiedIdentity {
  subject: string;
  email: string;
}

/** How the service reaches identity providers: its clock (injectable in tests), its egress policy and the extra CA of `--outbound-ca-file`. */
export interface OidcContext {
  clock: () => number;
  /** Every request to the IdP (discovery, keys, token, userinfo) connects through it; unset: the default policy. */
  egress?: EgressPolicy;
  outboundCaFile?: string;
}

const DEFAULT_POLICY = new EgressPolicy();

/**
 * The most an identity provider's answer (discovery, keys, token, userinfo) may be: real ones are a
 * few KB. The IdP is whatever a tenant admin configured, and each anonymous sign-in fetches from it:
 * one 300 MB discovery document took the service from 500 MB to 1.9 GB, and three at once held
 * every tenant's requests 2.6 s.
 */
export const IDP_ANSWER_MAX_BYTES = 256 * 1024;

/** The answer with its body read, refused past IDP_ANSWER_MAX_BYTES (declared or streamed) without reading the rest. */
export async function boundedAnswer(res: Response, url: string): Promise<Response> {
  const tooLarge = (n: string) =>
    new Error(`the answer of ${url} is ${n} bytes; an identity provider's is at most ${IDP_ANSWER_MAX_BYTES}`);
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (declared > IDP_ANSWER_MAX_BYTES) {
    await res.body?.cancel().catch(() => undefined);
    throw tooLarge(String(declared));
  }
  if (!res.body) return res;
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > IDP_ANSWER_MAX_BYTES) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(`over ${IDP_ANSWER_MAX_BYTES}`);
    }
    chunks.push(value);
  }
  const noBody = [204, 205, 304].includes(res.status);
  return new Response(noBody ? null : Buffer.concat(chunks), { status: res.status, statusText: res.statusText, headers: res.headers });
}

/** openid-client's fetch through an agent under the egress policy (and trusting extra CAs), its answers bounded. */
function fetchThrough(dispatcher: Agent): oidc.CustomFetch {
  return async (url, options) =>
    boundedAnswer((await undiciFetch(url, { ...options, dispatcher } as never)) as unknown as Response, String(url));
}

/** The network or TLS reason behind a failed fetch ("fetch failed" alone says nothing). */
function rootCause(err: unknown): string {
  let e = err as { message?: string; cause?: unknown; code?: string } | undefined;
  let message = e?.message ?? String(err);
  while (e?.cause) {
    e = e.cause as typeof e;
    if (e?.message) message = e.code ? `${e.message} (${e.code})` : e.message;
  }
  return message;
}

/** Discovered configurations per service (its OidcContext), kept on the service's clock: discovery-cache.ts. */
const discovered = new WeakMap<OidcContext, DiscoveryCache<oidc.Configuration>>();

/**
 * The IdP's configuration, from its discovery document, kept a while (discovery-cache.ts). The key
 * is everything the configuration (or a failure's message) is made of, and updated_at besides, so
 * any edit of the provider is a miss. The service's clock (injectable in tests) is the one ID tokens
 * are checked against: its distance to the real clock is part of the configuration, and so of the
 * key (in production it is always 0).
 *
 * Signing keys: openid-client keeps the JWKS it fetched per configuration (by the identity of its
 * server metadata, so a configuration made per sign-in fetched them at every callback), 5 minutes at
 * most, and fetches them again when a token names a key the set lacks and the set is a minute old:
 * a rotated key is seen within a minute, whatever KEPT_MS is.
 */
function configure(p: SsoProvider, oc: OidcContext): Promise<oidc.Configuration> {
  const issuer = p.issuer ?? (p.protocol === 'google' ? GOOGLE_ISSUER : undefined);
  const clientId = p.client_id;
  if (!issuer || !clientId) throw unprocessable(`SSO provider "${p.name}" needs issuer and client_id`);
  const skew = Math.round((oc.clock() - Date.now()) / 1000);
  let cache = discovered.get(oc);
  if (!cache) discovered.set(oc, (cache = new DiscoveryCache(oc.clock)));
  const settings = [p.id, p.name, p.protocol, p.updated_at ?? null, issuer, clientId, p.client_secret ?? null, p.ca_certificate ?? null];
  const key = createHash('sha256')
    .update(JSON.stringify([...settings, skew]))
    .digest('base64url');
  return cache.get(key, () => discover(p, issuer, clientId, skew, oc));
}

async function discover(
  p: SsoProvider,
  issuer: string,
  clientId: string,
  skew: number,
  { egress, outboundCaFile }: OidcContext,
): Promise<oidc.Configuration> {
  const metadata: Partial<oidc.ClientMetadata> = { [oidc.clockSkew]: skew };
  const auth = p.client_secret ? oidc.ClientSecretBasic(p.client_secret) : oidc.None();
  // Signature checks on the ID token even though it comes straight from the token endpoint over TLS
  // (OIDC allows skipping them there): a proxy or a compromised route must not be able to forge one.
  const options: oidc.DiscoveryRequestOptions = { execute: [oidc.enableNonRepudiationChecks] };
  options[oidc.customFetch] = fetchThrough(outboundAgent(egress ?? DEFAULT_POLICY, { caFile: outboundCaFile, caPems: [p.ca_certificate] }));
  try {
    return await oidc.discovery(new URL(issuer), clientId, metadata, auth, options);
  } catch (err) {
    throw unprocessable(`SSO provider "${p.name}": cannot read the OpenID configuration of ${issuer}: ${rootCause(err)}`);
  }
}

/** The authorization URL (code flow, PKCE S256, state and nonce) and the secrets the callback needs. */
export async function beginOidc(
  p: SsoProvider,
  redirectUri: string,
  oc: OidcContext,
): Promise<{ codeVerifier: string; nonce: string; url: (state: string) => string }> {
  const config = await configure(p, oc);
  const codeVerifier = oidc.randomPKCECodeVerifier();
  const codeChallenge = await oidc.calculatePKCECodeChallenge(codeVerifier);
  const nonce = oidc.randomNonce();
  const scope = [...new Set(['openid', ...p.scopes])].join(' ');
  return {
    codeVerifier,
    nonce,
    url: (state) =>
      oidc.buildAuthorizationUrl(config, {
        redirect_uri: redirectUri,
        response_type: 'code',
        scope,
        code_challenge: codeChallenge,
        code_challenge_method: 'S256',
        state,
        nonce,
      }).href,
  };
}

/**
 * Exchanges the code (with the PKCE verifier) and verifies the ID token: signature against the
 * IdP's keys, issuer, audience (our client_id), expiry and nonce; openid-client does all of it.
 */
export async function finishOidc(
  p: SsoProvider,
  flow: { redirectUri: string; codeVerifier: string; nonce: string; state: string },
  query: Record<string, string>,
  oc: OidcContext,
): Promise<VerifiedIdentity> {
  const config = await configure(p, oc);
  const callbackUrl = new URL(flow.redirectUri);
  for (const [k, v] of Object.entries(query)) callbackUrl.searchParams.set(k, v);
  let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>;
  try {
    tokens = await oidc.authorizationCodeGrant(config, callbackUrl, {
      pkceCodeVerifier: flow.codeVerifier,
      expectedNonce: flow.nonce,
      expectedState: flow.state,
      idTokenExpected: true,
    });
  } catch (err) {
    throw signInRefused(p, err);
  }
  const claims = tokens.claims();
  if (!claims) throw unauthorized(`Sign-in with "${p.name}" failed: the identity provider returned no ID token`);
  let email = typeof claims.email === 'string' ? claims.email : undefined;
  let verified = claims.email_verified;
  if (!email && tokens.access_token) {
    try {
      const info = await oidc.fetchUserInfo(config, tokens.access_token, claims.sub);
      email = typeof info.email === 'string' ? info.email : undefined;
      verified = info.email_verified;
    } catch (err) {
      throw signInRefused(p, err);
    }
  }
  if (!email)
    throw unauthorized(`Sign-in with "${p.name}" failed: the identity provider did not tell the email address (request the "email" scope)`);
  if (verified === false) throw unauthorized(`Sign-in with "${p.name}" failed: the identity provider says ${email} is not verified`);
  return { subject: claims.sub, email };
}

/** The IdP's own refusal (error=access_denied on the callback, invalid_grant at the token endpoint) or a failed ID token check. */
function signInRefused(p: SsoProvider, err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as {
    error?: string;
    error_description?: string;
    message?: string;
    code?: string;
    cause?: { message?: string; code?: string };
  };
  if (err instanceof oidc.AuthorizationResponseError || err instanceof oidc.ResponseBodyError) {
    return unauthorized(
      `Sign-in with "${p.name}" was refused by the identity provider: ${e.error}${e.error_description ? ` (${e.error_description})` : ''}`,
    );
  }
  if (e.code?.startsWith('OAUTH_') || err instanceof oidc.ClientError) {
    // openid-client wraps oauth4webapi's precise reason ('unexpected JWT "aud" (audience) claim value') in a generic one.
    const precise = e.cause?.code?.startsWith('OAUTH_') && e.cause.message ? e.cause.message : e.message;
    return unauthorized(`Sign-in with "${p.name}" failed: ${precise}`);
  }
  return unprocessable(`SSO provider "${p.name}": the identity provider could not be reached: ${rootCause(err)}`);
}
