import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ServiceContext } from '../context.js';
import type { JsonSchema } from '../../kinds/index.js';
import { errorResponses, pageQuerySchema, pageSchema } from './crud.js';
import { resolveProject } from './scope.js';
import { toPage } from '../pagination.js';
import { notFound } from '../errors.js';
import { runtimeOf } from '../runtime/runtime.js';
import { deliver, listDeliveries } from '../runtime/notifications.js';

const params = (...names: string[]) => ({ type: 'object', properties: Object.fromEntries(names.map((n) => [n, { type: 'string' }])) });

const testResultSchema: JsonSchema = {
  type: 'object',
  title: 'Notification test result',
  description: 'A failed delivery is still 200, with success false and the reason.',
  required: ['success', 'message'],
  properties: {
    success: { type: 'boolean' },
    message: { type: 'string' },
    status_code: { type: 'integer', description: 'HTTP status the webhook or Slack answered (webhook and slack channels).' },
  },
} as JsonSchema;

const deliverySchema: JsonSchema = {
  type: 'object',
  title: 'Notification delivery',
  properties: {
    id: { type: 'string' },
    channel_id: { type: 'string' },
    event_type: { type: 'string', description: 'alert_fired, alert_escalated, test, pipeline_notification' },
    alert_id: { type: ['string', 'null'] },
    status: { type: 'string', enum: ['delivered', 'failed', 'skipped'] },
    status_code: { type: ['integer', 'null'] },
    attempts: { type: 'integer' },
    message: { type: 'string' },
    created_at: { type: 'string', format: 'date-time' },
  },
} as JsonSchema;

/** Notification channel operations: the spec's test, and the delivery log (extension). */
export function registerNotificationRoutes(app: FastifyInstance, ctx: ServiceContext) {
  const rt = runtimeOf(ctx);
  const load = async (req: FastifyRequest) => {
    const projectId = await resolveProject(ctx, req);
    const id = (req.params as { channelId: string }).channelId;
    const found = await ctx.resources.get(req.tenant!.id, projectId, 'notification_channel', id);
    if (!found) throw notFound('Notification channel');
    return { projectId, found };
  };

  app.post(
    '/api/v1/projects/:id/notification-channels/:channelId/test',
    {
      config: {
        settings: {
          permission: 'read-write',
          keys: 'own-project',
          audit: { resourceType: 'notification_channel', action: 'notification_channel.test' },
        },
      },
      schema: {
        tags: ['Notification channel'],
        operationId: 'test_notification_channel',
        summary: 'Send a test notification',
        description:
          'Sends a test event through the channel now (also when it is disabled): webhook POSTs JSON (signed with X-Dataplatform-Signature when a signing_secret is set), slack posts to its webhook, email is written to the outbox. ' +
          'Deliveries are retried with backoff; a failed delivery is still 200 with success false and the reason.',
        params: params('id', 'channelId'),
        response: { 200: testResultSchema, ...errorResponses },
      },
    },
    async (req) => {
      const { projectId, found } = await load(req);
      req.auditDetails = { projectId, resourceId: found.id, resourceName: found.name };
      const result = await deliver(rt, found, {
        type: 'test',
        project_id: projectId,
        timestamp: rt.now(),
        channel_id: found.id,
        message: 'Test notification from the data platform',
      });
      req.auditDetails.diff = { success: { before: null, after: result.success } };
      return {
        success: result.success,
        message: result.message,
        ...(result.status_code !== undefined ? { status_code: result.status_code } : {}),
      };
    },
  );

  if (ctx.options.strictSpec) return;
  app.get(
    '/api/v1/projects/:id/notification-channels/:channelId/deliveries',
    {
      config: { settings: { permission: 'read-only', keys: 'own-project' } },
      schema: {
        tags: ['Notification channel'],
        operationId: 'list_notification_deliveries',
        summary: 'List deliveries of the channel, oldest first',
        'x-extension': true,
        params: params('id', 'channelId'),
        querystring: pageQuerySchema,
        response: { 200: pageSchema(deliverySchema), ...errorResponses },
      } as Record<string, unknown>,
    },
    async (req) => {
      const { found } = await load(req);
      const { limit, cursor } = req.query as { limit: number; cursor?: string };
      const scope = `${req.tenant!.id}:${found.id}:deliveries`;
      const rows = await listDeliveries(rt, req.tenant!.id, found.id, ctx.cursors.decode(scope, cursor), limit + 1);
      return toPage(rows, limit, scope, ctx.cursors, ({ seq: _seq, ...r }) => r);
    },
  );
}
