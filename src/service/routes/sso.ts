import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceContext, RouteSettings } from '../context.js';
import { ApiError, unauthorized } from '../errors.js';
import { errorResponses } from './crud.js';
import { tokenResponse } from './auth.js';
import { SsoFlows, type SsoFlow } from '../sso/flows.js';
import { assertProtocol, loadGoogleProvider, loadProvider, type SsoProvider } from '../sso/provider.js';
import { beginOidc, finishOidc } from '../sso/oidc.js';
import { egressPolicy } from '../egress.js';
import { finishSaml, newSamlRequestId, samlLoginUrl, samlMetadata } from '../sso/saml.js';
import { auditProvisioning, signInVerified } from '../sso/sign-in.js';
import type { VerifiedIdentity } from '../sso/oidc.js';

/**
 * Browser sign-in (spec sections 4 and 5): the login routes redirect to the identity provider,
 * which sends the browser back to a callback that answers the spec's token response.
 * Callback paths (the spec leaves them to us; register them at the IdP):
 *   GET  /api/v1/auth/sso/{provider_id}/callback   OIDC (code + state)
 *   POST /api/v1/auth/sso/{provider_id}/callback   SAML assertion consumer (SAMLResponse + RelayState, form-encoded)
 *   GET  /api/v1/auth/google/callback              Google sign-in
 * and, for IdPs that import it, SAML service provider metadata at GET /api/v1/auth/sso/{provider_id}/saml-metadata.
 */

const providerParams = {
  type: 'object',
  required: ['provider_id'],
  properties: { provider_id: { type: 'string', description: 'SSO provider id (GET /sso-providers)' } },
};
const redirectResponse = { 302: { type: 'null', description: 'Redirect (Location) to the identity provider' } };
const oidcCallbackQuery = {
  type: 'object',
  // IdPs add parameters of their own (session_state, iss, scope); they are passed on to openid-client, which checks iss.
  additionalProperties: { type: 'string' },
  properties: {
    code: { type: 'string', description: 'Authorization code from the IdP' },
    state: { type: 'string', description: 'The state this service sent' },
    error: { type: 'string', description: 'The IdP refused: access_denied, ...' },
    error_description: { type: 'string' },
  },
};
const samlCallbackBody = {
  type: 'object',
  required: ['SAMLResponse'],
  properties: {
    SAMLResponse: { type: 'string', minLength: 1, description: 'Base64 SAML Response (HTTP-POST binding)' },
    RelayState: { type: 'string', description: 'The state this service sent' },
  },
};
const signInAudit: RouteSettings = { public: true, anonymous: true, audit: { resourceType: 'session', action: 'auth.sso_login' } };

/** The public origin the browser used: the tenant's host, so the callback lands on the same tenant. */
const apiBase = (req: FastifyRequest) => `https://${req.headers.host}/api/v1`;

const unknownState = (loginPath: string) =>
  unauthorized(
    `Unknown, expired or already used sign-in state; sign-in flows are single-use and last 10 minutes: start again at ${loginPath}`,
  );

export function registerSsoRoutes(app: FastifyInstance, ctx: ServiceContext) {
  const flows = new SsoFlows(ctx.db, ctx.options.clock);
  const oc = { clock: ctx.options.clock, egress: egressPolicy(ctx.options), outboundCaFile: ctx.options.outboundCaFile };

  /** Starts a flow: the state (and the nonce, PKCE verifier or SAML request id) go to the database, the browser goes to the IdP. */
  async function begin(req: FastifyRequest, reply: FastifyReply, p: SsoProvider, redirectUri: string) {
    const tenantId = req.tenant!.id;
    let location: string;
    if (p.protocol === 'saml') {
      const requestId = newSamlRequestId();
      const state = await flows.start({ tenantId, providerId: p.id, nonce: null, codeVerifier: null, requestId, redirectUri });
      location = await samlLoginUrl(p, redirectUri, requestId, state);
    } else {
      const oidc = await beginOidc(p, redirectUri, oc);
      const state = await flows.start({
        tenantId,
        providerId: p.id,
        nonce: oidc.nonce,
        codeVerifier: oidc.codeVerifier,
        requestId: null,
        redirectUri,
      });
      location = oidc.url(state);
    }
    reply.header('cache-control', 'no-store');
    return reply.redirect(location, 302);
  }

  /** Ends a flow: the verified identity becomes a session of the matching (or a new) user. */
  async function finish(req: FastifyRequest, p: SsoProvider, identity: VerifiedIdentity) {
    const tenantId = req.tenant!.id;
    const signed = await signInVerified(ctx, tenantId, p, identity);
    if (signed.provisioned) await auditProvisioning(ctx, tenantId, p, signed.user, req.id);
    req.auditDetails = {
      actor: { type: 'user', id: signed.user.id, name: signed.user.name },
      resourceId: signed.user.id,
      resourceName: `${p.name} (${p.protocol})`,
    };
    return signed.tokens;
  }

  async function finishOidcFlow(req: FastifyRequest, p: SsoProvider, flow: SsoFlow, query: Record<string, string>) {
    if (!flow.codeVerifier || !flow.nonce) throw unknownState(`${apiBase(req)}/auth/sso/${p.id}/login`);
    const identity = await finishOidc(
      p,
      { redirectUri: flow.redirectUri, codeVerifier: flow.codeVerifier, nonce: flow.nonce, state: query.state },
      query,
      oc,
    );
    return finish(req, p, identity);
  }

  app.register(async (scope) => {
    // The SAML HTTP-POST binding is an HTML form post; only this scope accepts form bodies.
    scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
      done(null, Object.fromEntries(new URLSearchParams(String(body))));
    });

    scope.get(
      '/api/v1/auth/sso/:provider_id/login',
      {
        config: { settings: { public: true, anonymous: true } },
        schema: {
          tags: ['Authentication'],
          summary: 'Single sign-on: redirect the browser to the identity provider (OIDC or SAML)',
          description:
            'OIDC: authorization code flow with PKCE (S256), state and nonce; the IdP returns to GET /auth/sso/{provider_id}/callback. SAML: an AuthnRequest by HTTP-Redirect; the IdP posts to POST /auth/sso/{provider_id}/callback. Flows are single-use and expire after 10 minutes.',
          operationId: 'sso_login',
          security: [],
          params: providerParams,
          response: { ...redirectResponse, ...errorResponses },
        },
      },
      async (req, reply) => {
        const { provider_id } = req.params as { provider_id: string };
        const p = await loadProvider(ctx, req.tenant!.id, provider_id);
        return begin(req, reply, p, `${apiBase(req)}/auth/sso/${p.id}/callback`);
      },
    );

    scope.get(
      '/api/v1/auth/sso/:provider_id/callback',
      {
        config: { settings: signInAudit },
        schema: {
          tags: ['Authentication'],
          summary: 'Single sign-on callback (OIDC): exchange the code and answer tokens',
          description:
            'The redirect URI to register at an OIDC identity provider. Verifies state (single use), the PKCE-bound code exchange and the ID token (signature, issuer, audience, expiry, nonce), matches the user by email and answers the token response.',
          operationId: 'sso_callback',
          security: [],
          params: providerParams,
          querystring: oidcCallbackQuery,
          response: { 200: tokenResponse, ...errorResponses },
        },
      },
      async (req) => {
        const { provider_id } = req.params as { provider_id: string };
        const query = req.query as Record<string, string>;
        const p = await loadProvider(ctx, req.tenant!.id, provider_id);
        assertProtocol(p, ['oidc', 'google'], 'SAML identity providers POST their response to this path');
        const loginPath = `${apiBase(req)}/auth/sso/${p.id}/login`;
        if (!query.state)
          throw new ApiError('validation_error', 'The callback has no state parameter', [{ field: 'state', message: 'is required' }]);
        const flow = await flows.claim(req.tenant!.id, query.state);
        if (!flow || flow.providerId !== p.id) throw unknownState(loginPath);
        return finishOidcFlow(req, p, flow, query);
      },
    );

    scope.post(
      '/api/v1/auth/sso/:provider_id/callback',
      {
        config: { settings: signInAudit },
        schema: {
          tags: ['Authentication'],
          summary: 'Single sign-on callback (SAML assertion consumer): verify the response and answer tokens',
          description:
            "The ACS URL to register at a SAML identity provider (HTTP-POST binding, application/x-www-form-urlencoded). The assertion must be signed with the configured IdP certificate, name this service's entity id as Audience, be within its validity window and answer the AuthnRequest this service sent (InResponseTo, RelayState). Unsolicited (IdP-initiated) responses are refused.",
          operationId: 'sso_saml_callback',
          security: [],
          consumes: ['application/x-www-form-urlencoded'],
          params: providerParams,
          body: samlCallbackBody,
          response: { 200: tokenResponse, ...errorResponses },
        },
      } as never,
      async (req) => {
        const { provider_id } = req.params as { provider_id: string };
        const { SAMLResponse, RelayState } = req.body as { SAMLResponse: string; RelayState?: string };
        const p = await loadProvider(ctx, req.tenant!.id, provider_id);
        assertProtocol(p, ['saml'], `OIDC identity providers return to GET ${apiBase(req)}/auth/sso/${p.id}/callback`);
        const loginPath = `${apiBase(req)}/auth/sso/${p.id}/login`;
        if (!RelayState)
          throw unauthorized(`Unsolicited SAML response (no RelayState): IdP-initiated sign-in is not accepted; start at ${loginPath}`);
        const flow = await flows.claim(req.tenant!.id, RelayState);
        if (!flow || flow.providerId !== p.id) throw unknownState(loginPath);
        return finish(req, p, await finishSaml(p, flow.redirectUri, flow.requestId, SAMLResponse));
      },
    );

    if (!ctx.options.strictSpec)
      scope.get(
        '/api/v1/auth/sso/:provider_id/saml-metadata',
        {
          config: { settings: { public: true, anonymous: true } },
          schema: {
            tags: ['Authentication'],
            summary: 'SAML service provider metadata of a SAML provider (entity id and ACS URL), for IdPs that import it',
            operationId: 'sso_saml_metadata',
            'x-extension': true,
            security: [],
            params: providerParams,
            produces: ['application/samlmetadata+xml'],
            response: { 200: { type: 'string', description: 'SAML 2.0 EntityDescriptor (XML)' }, ...errorResponses },
          },
        } as never,
        async (req, reply) => {
          const { provider_id } = req.params as { provider_id: string };
          const p = await loadProvider(ctx, req.tenant!.id, provider_id);
          assertProtocol(p, ['saml'], 'only SAML providers have service provider metadata');
          reply.type('application/samlmetadata+xml');
          return samlMetadata(p, `${apiBase(req)}/auth/sso/${p.id}/callback`);
        },
      );

    scope.get(
      '/api/v1/auth/google/login',
      {
        config: { settings: { public: true, anonymous: true } },
        schema: {
          tags: ['Authentication'],
          summary: "Google sign-in: redirect the browser to Google (the tenant's SSO provider with protocol google)",
          description:
            "OpenID Connect against the provider's issuer (https://accounts.google.com unless configured otherwise); Google returns to GET /auth/google/callback.",
          operationId: 'google_login',
          security: [],
          response: { ...redirectResponse, ...errorResponses },
        },
      },
      async (req, reply) => {
        const p = await loadGoogleProvider(ctx, req.tenant!.id);
        return begin(req, reply, p, `${apiBase(req)}/auth/google/callback`);
      },
    );

    scope.get(
      '/api/v1/auth/google/callback',
      {
        config: { settings: signInAudit },
        schema: {
          tags: ['Authentication'],
          summary: 'Google sign-in callback: exchange the code and answer tokens',
          description: 'The authorized redirect URI to register in the Google Cloud OAuth client.',
          operationId: 'google_callback',
          security: [],
          querystring: oidcCallbackQuery,
          response: { 200: tokenResponse, ...errorResponses },
        },
      },
      async (req) => {
        const query = req.query as Record<string, string>;
        const loginPath = `${apiBase(req)}/auth/google/login`;
        if (!query.state)
          throw new ApiError('validation_error', 'The callback has no state parameter', [{ field: 'state', message: 'is required' }]);
        const flow = await flows.claim(req.tenant!.id, query.state);
        if (!flow) throw unknownState(loginPath);
        const p = await loadProvider(ctx, req.tenant!.id, flow.providerId);
        assertProtocol(p, ['google'], `its callback is ${apiBase(req)}/auth/sso/${p.id}/callback`);
        return finishOidcFlow(req, p, flow, query);
      },
    );
  });
}
