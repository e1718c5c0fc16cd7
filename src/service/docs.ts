import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { stringify as stringifyYaml } from 'yaml';
import type { ServiceContext } from './context.js';
import { tenantSlugFromHost } from './tenants.js';
import { DOCS_CSS, DOCS_SCRIPT, PRODUCT_MARK_SVG } from './docs/assets.js';

const TITLE = 'Data Platform Management API';
const DOCS_PREFIX = '/api/docs';

/** What a reader needs before the first call; Swagger UI renders it (Markdown) under the title. */
const INTRO =
  'Configure this tenant of the data platform: projects, connectors, infrastructure, dbt projects, pipelines and their runs, ' +
  'alerting, governance and users. All paths below are relative to `/api/v1` on this host.\n\n' +
  'Every operation except signing in needs an `Authorization: Bearer <token>` header. The token is either an access token from ' +
  '`POST /api/v1/auth/login` with your email and password (the sign-in form at the top of the interactive reference, `/api/docs`, does that for you), or a ' +
  'project API key (`dpk_...`, created by an admin with `POST /projects/{id}/api-keys`); **Authorize** takes either one pasted.\n\n' +
  'The machine-readable description is the [OpenAPI document](' +
  DOCS_PREFIX +
  '/openapi.json).';

/**
 * Swagger UI calls this in the browser: @fastify/swagger-ui copies the function's source into its
 * initializer script, where `ui` is the Swagger UI instance. It must stay self-contained (no
 * imports, no constants from this module); the event name is UI_READY_EVENT of docs/assets.ts.
 */
declare const ui: unknown;
function announceSwaggerUi() {
  document.dispatchEvent(new CustomEvent('dataplatform:swagger-ui-ready', { detail: ui }));
}

/**
 * OpenAPI 3.1 generated from the route schemas (which come from schemas/), and the
 * interactive reference with try-it-out and a pasted bearer token.
 */
export async function registerDocs(app: FastifyInstance, ctx: ServiceContext) {
  // The reference is served on every host (tenant or not) without a token.
  app.addHook('onRoute', (route) => {
    if (route.url.startsWith('/api/docs')) route.config = { ...(route.config as object), settings: { tenantless: true, public: true } };
  });
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: TITLE,
        version: 'v1',
        description:
          INTRO +
          '\n\n### About this implementation\n\n' +
          'Reference implementation. Operations marked `x-extension: true` are our documented additions to the spec; ' +
          'start the service with `--strict-spec` to serve only the documented surface. ' +
          'WebSocket streams (not listed as operations): `wss://<tenant host>/api/v1/ws/pipelines/{pipelineId}/runs/{runId}` sends ' +
          '`step_update` messages {type, step_id, step_name, status, duration_seconds, timestamp}; `wss://<tenant host>/api/v1/ws/alerts` sends ' +
          '{type: alert_fired | alert_acknowledged | alert_resolved, alert, timestamp}. Both authenticate with the `token` query parameter only ' +
          '(access token or API key); refusals are HTTP 401/404/426 before the upgrade; close codes 4401 (credential revoked or expired), ' +
          '4403 (no longer allowed), 4404 (pipeline deleted), 1001 (server shutting down), 1011 (server error). See docs/guides/streams.md in the package.',
      },
      servers: [{ url: '/api/v1', description: 'This tenant host' }],
      components: {
        securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'An access token from /auth/login or an API key' } },
      },
      security: [{ bearerAuth: [] }],
    },
    stripBasePath: true,
    // @fastify/swagger marks every request body required; an operation whose schema says
    // `x-body-optional: true` (infrastructure apply) takes none at all.
    transformObject: (document) => {
      const openapiObject = (document as { openapiObject: { paths?: Record<string, Record<string, Record<string, unknown>>> } })
        .openapiObject;
      for (const item of Object.values(openapiObject.paths ?? {})) {
        for (const op of Object.values(item)) {
          if (!op?.['x-body-optional']) continue;
          delete op['x-body-optional'];
          if (op.requestBody) (op.requestBody as { required?: boolean }).required = false;
        }
      }
      return openapiObject as never;
    },
    // Shared schemas (app.addSchema) keep their $id as the component name, e.g.
    // #/components/schemas/ErrorEnvelope instead of the default "def-0".
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
  });
  await app.register(swaggerUi, {
    routePrefix: DOCS_PREFIX,
    uiConfig: {
      persistAuthorization: true,
      tryItOutEnabled: true,
      displayOperationId: false,
      // BaseLayout is StandaloneLayout without its top bar (the Fastify logo and the "Explore" URL box).
      layout: 'BaseLayout',
      onComplete: announceSwaggerUi,
    },
    // Only shown in StandaloneLayout's top bar; given anyway so the initializer does not carry Fastify's logo.
    logo: { type: 'image/svg+xml', content: PRODUCT_MARK_SVG },
    theme: {
      title: TITLE,
      favicon: [{ filename: 'favicon.svg', rel: 'icon', type: 'image/svg+xml', sizes: 'any', content: PRODUCT_MARK_SVG }],
      css: [{ filename: 'dataplatform.css', content: DOCS_CSS }],
      js: [{ filename: 'dataplatform-login.js', content: DOCS_SCRIPT }],
    },
    // The page's document (not /openapi.json, which stays the same on every host) names the tenant:
    // answered here, before the plugin's own routes, which serialised it on every request.
    uiHooks: { preHandler: async (req: FastifyRequest, reply: FastifyReply) => answerDocument(app, ctx, req, reply) },
    staticCSP: false,
  });
  app.get(`${DOCS_PREFIX}/openapi.json`, { schema: { hide: true } }, async (_req, reply) => {
    void reply.type(DOCUMENT_TYPES.json);
    return documentText(app, 'json', TITLE);
  });
}

/**
 * The page's document, `/json` or `/yaml`, with the tenant's name in its title. The docs routes
 * skip the tenant lookup of every other route (they are served on any host), so it is found here.
 */
async function answerDocument(app: FastifyInstance, ctx: ServiceContext, req: FastifyRequest, reply: FastifyReply) {
  const format = /\/(json|yaml)$/.exec(req.routeOptions.url ?? '')?.[1] as keyof typeof DOCUMENT_TYPES | undefined;
  if (!format) return;
  const slug = tenantSlugFromHost(req.headers.host, ctx.options.baseDomain);
  const tenant = slug ? await ctx.tenants.bySlug(slug) : undefined;
  reply.type(DOCUMENT_TYPES[format]).send(documentText(app, format, tenant ? `${TITLE} \u2014 ${tenant.name}` : TITLE));
  return reply;
}

const DOCUMENT_TYPES = { json: 'application/json; charset=utf-8', yaml: 'application/x-yaml' } as const;
/** Where the title goes in the serialised document: a token no title or schema contains. */
const TITLE_MARK = 'dataplatform-docs-title-7f3a9c';

/**
 * The OpenAPI document as text with `title`. Anyone may ask for it on any host, and serialising
 * the 555 KB document cost 4-8 ms of CPU as JSON (one anonymous client at 8 concurrent requests put
 * another tenant's p99 at 257 ms), more as YAML: each format is serialised once, around a mark
 * where the title goes, and a request joins the two halves with its title.
 */
const serialised = new WeakMap<FastifyInstance, Partial<Record<keyof typeof DOCUMENT_TYPES, [string, string]>>>();
function documentText(app: FastifyInstance, format: keyof typeof DOCUMENT_TYPES, title: string): string {
  let halves = serialised.get(app);
  if (!halves) serialised.set(app, (halves = {}));
  if (!halves[format]) {
    const spec = app.swagger() as { info: Record<string, unknown> };
    const marked = { ...spec, info: { ...spec.info, title: TITLE_MARK } };
    const text = format === 'json' ? JSON.stringify(marked) : stringifyYaml(marked);
    // Quoted in JSON, a plain scalar in YAML: the halves end and start outside the title's quotes.
    const mark = format === 'json' ? JSON.stringify(TITLE_MARK) : TITLE_MARK;
    const at = text.indexOf(mark);
    halves[format] = [text.slice(0, at), text.slice(at + mark.length)];
  }
  const [before, after] = halves[format];
  return before + (format === 'json' ? JSON.stringify(title) : yamlScalar(title)) + after;
}

/** The title as YAML writes it on one line (plain where it can be); quoted as JSON if it would take several. */
function yamlScalar(text: string): string {
  const scalar = stringifyYaml(text, { lineWidth: 0 }).trimEnd();
  return scalar.includes('\n') ? JSON.stringify(text) : scalar;
}
