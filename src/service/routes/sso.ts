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
const signInAudit: RouteSettings = {
  public: true,
  anonymous: true,
  noStore: true,
  audit: { resourceType: 'session', action: 'auth.sso_login' },
};

/** The public origin the browser used: the tenant's host, so the callback lands on the same tenant. */
const apiBase = (req: FastifyRequest) => `https://${req.headers.host}/api/v1`;

const unknownState = (loginPath: string) =>
  unauthorized(
    `Unknown, expired or already used sign-in state; sign-in flows are single-use and last 10 minutes: start again at ${loginPath}`,
  );

/** The callback's `state`: a callback without one is a 400, not an unknown flow. */
export function requireState(state: string | undefined): string {
  if (!state) throw new ApiError('validation_error', 'The callback has no state parameter', [{ field: 'state', message: 'is required' }]);
  return state;
}

/** A SAML HTTP-POST binding's form body as fields (the last of a repeated name wins). */
export const parseFormBody = (body: string): Record<string, string> => Object.fromEntries(new URLSearchParams(body));

/** The steps every sign-in route shares: start a flow, claim it back at the callback, finish it as a session. */
class SsoSignIn {
  private readonly flows: SsoFlows;
  private readonly oc: { clock: () => number; egress: ReturnType<typeof egressPolicy>; outboundCaFile?: string };

  constructor(private readonly ctx: ServiceContext) {
    this.flows = new SsoFlows(ctx.db, ctx.options.clock);
    this.oc = { clock: ctx.options.clock, egress: egressPolicy(ctx.options), outboundCaFile: ctx.options.outboundCaFile };
  }

  /** The tenant's provider named in the path. */
  provider(req: FastifyRequest): Promise<SsoProvider> {
    const { provider_id } = req.params as { provider_id: string };
    return loadProvider(this.ctx, req.tenant!.id, provider_id);
  }

  /** Starts a flow: the state (and the nonce, PKCE verifier or SAML request id) go to the database, the browser goes to the IdP. */
  async begin(req: FastifyRequest, reply: FastifyReply, p: SsoProvider, redirectUri: string) {
    const tenantId = req.tenant!.id;
    let location: string;
    if (p.protocol === 'saml') {
      const requestId = newSamlRequestId();
      const state = await this.flows.start({ tenantId, providerId: p.id, nonce: null, codeVerifier: null, requestId, redirectUri });
      location = await samlLoginUrl(p, redirectUri, requestId, state);
    } else {
      const oidc = await beginOidc(p, redirectUri, this.oc);
      const state = await this.flows.start({
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

  /** The flow a callback's state names, once (flows are single-use); undefined when unknown, expired or used. */
  claim(req: FastifyRequest, state: string): Promise<SsoFlow | undefined> {
    return this.flows.claim(req.tenant!.id, state);
  }

  /** Ends a flow: the verified identity becomes a session of the matching (or a new) user. */
  async finish(req: FastifyRequest, p: SsoProvider, identity: VerifiedIdentity) {
    const tenantId = req.tenant!.id;
    const signed = await signInVerified(this.ctx, tenantId, p, identity);
    if (signed.provisioned) await auditProvisioning(this.ctx, tenantId, p, signed.user, req.id);
    req.auditDetails = {
      actor: { type: 'user', id: signed.user.id, name: signed.user.name },
      resourceId: signed.user.id,
      resourceName: `${p.name} (${p.protocol})`,
    };
    return signed.tokens;
  }

  async finishOidc(req: FastifyRequest, p: SsoProvider, flow: SsoFlow, query: Record<string, string>) {
    if (!flow.codeVerifier || !flow.nonce) throw unknownState(`${apiBase(req)}/auth/sso/${p.id}/login`);
    const identity = await finishOidc(
      p,
      { redirectUri: flow.redirectUri, codeVerifier: flow.codeVerifier, nonce: flow.nonce, state: query.state },
      query,
      this.oc,
    );
    return this.finish(req, p, identity);
  }

  async finishSaml(req: FastifyRequest, p: SsoProvider, flow: SsoFlow, samlResponse: string) {
    return this.finish(req, p, await finishSaml(p, flow.redirectUri, flow.requestId, samlResponse));
  }
}

/** GET /auth/sso/{provider_id}/login: to the provider's IdP, OIDC or SAML. */
function registerSsoLogin(scope: FastifyInstance, sso: SsoSignIn) {
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
      const p = await sso.provider(req);
      return sso.begin(req, reply, p, `${apiBase(req)}/auth/sso/${p.id}/callback`);
    },
  );
}

/** GET /auth/sso/{provider_id}/callback: where an OIDC IdP returns the browser. */
function registerOidcCallback(scope: FastifyInstance, sso: SsoSignIn) {
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
      const query = req.query as Record<string, string>;
      const p = await sso.provider(req);
      assertProtocol(p, ['oidc', 'google'], 'SAML identity providers POST their response to this path');
      const loginPath = `${apiBase(req)}/auth/sso/${p.id}/login`;
      const flow = await sso.claim(req, requireState(query.state));
      if (!flow || flow.providerId !== p.id) throw unknownState(loginPath);
      return sso.finishOidc(req, p, flow, query);
    },
  );
}

/** POST /auth/sso/{provider_id}/callback (the SAML assertion consumer) and, outside strict mode, the SP metadata. */
function registerSamlRoutes(scope: FastifyInstance, ctx: ServiceContext, sso: SsoSignIn) {
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
      const { SAMLResponse, RelayState } = req.body as { SAMLResponse: string; RelayState?: string };
      const p = await sso.provider(req);
      assertProtocol(p, ['saml'], `OIDC identity providers return to GET ${apiBase(req)}/auth/sso/${p.id}/callback`);
      const loginPath = `${apiBase(req)}/auth/sso/${p.id}/login`;
      if (!RelayState)
        throw unauthorized(`Unsolicited SAML response (no RelayState): IdP-initiated sign-in is not accepted; start at ${loginPath}`);
      const flow = await sso.claim(req, RelayState);
      if (!flow || flow.providerId !== p.id) throw unknownState(loginPath);
      return sso.finishSaml(req, p, flow, SAMLResponse);
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
        const p = await sso.provider(req);
        assertProtocol(p, ['saml'], 'only SAML providers have service provider metadata');
        reply.type('application/samlmetadata+xml');
        return samlMetadata(p, `${apiBase(req)}/auth/sso/${p.id}/callback`);
      },
    );
}

/** GET /auth/google/login and /auth/google/callback: the tenant's provider with protocol google. */
function registerGoogleRoutes(scope: FastifyInstance, ctx: ServiceContext, sso: SsoSignIn) {
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
      return sso.begin(req, reply, p, `${apiBase(req)}/auth/google/callback`);
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
      const flow = await sso.claim(req, requireState(query.state));
      if (!flow) throw unknownState(loginPath);
      const p = await loadProvider(ctx, req.tenant!.id, flow.providerId);
      assertProtocol(p, ['google'], `its callback is ${apiBase(req)}/auth/sso/${p.id}/callback`);
      return sso.finishOidc(req, p, flow, query);
    },
  );
}

export function registerSsoRoutes(app: FastifyInstance, ctx: ServiceContext) {
  const sso = new SsoSignIn(ctx);
  app.register(async (scope) => {
    // The SAML HTTP-POST binding is an HTML form post; only this scope accepts form bodies.
    scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
      done(null, parseFormBody(String(body)));
    });
    registerSsoLogin(scope, sso);
    registerOidcCallback(scope, sso);
    registerSamlRoutes(scope, ctx, sso);
    registerGoogleRoutes(scope, ctx, sso);
  });
}
