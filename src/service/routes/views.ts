import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ServiceContext } from '../context.js';
import { kind, type JsonSchema } from '../../kinds/index.js';
import { errorResponses, lockRow, pageQuerySchema, pageSchema } from './crud.js';
import { resolveProject } from './scope.js';
import { toPage } from '../pagination.js';
import { conflict, notFound } from '../errors.js';
import { nowIso } from '../ids.js';
import { topologicalOrder } from '../../kinds/dag.js';
import { runtimeOf } from '../runtime/runtime.js';
import { afterAlertTransition } from '../runtime/alerts.js';

interface DeclaredModel {
  name: string;
  materialization: string;
  depends_on: string[];
  sources: { connector_id: string; table: string }[];
}

const params = (...names: string[]) => ({ type: 'object', properties: Object.fromEntries(names.map((n) => [n, { type: 'string' }])) });

/** Read-only views and state transitions that are not plain CRUD: run history, models, lineage, alerts. */
export function registerViewRoutes(app: FastifyInstance, ctx: ServiceContext) {
  const parentOf = async (req: FastifyRequest, parentKind: string, param: string) => {
    const projectId = await resolveProject(ctx, req);
    const id = (req.params as Record<string, string>)[param];
    const parent = await ctx.resources.get(req.tenant!.id, projectId, parentKind, id);
    if (!parent) throw notFound(kind(parentKind).title);
    return { projectId, parent };
  };

  const runHistory = (path: string, parentKind: string, param: string, tag: string) =>
    app.get(
      path,
      {
        config: { settings: { permission: 'read-only', keys: 'own-project' } },
        schema: {
          tags: [tag],
          operationId: `list_${parentKind}_runs`,
          summary: 'List run history, newest last',
          params: params('id', param),
          querystring: pageQuerySchema,
          response: { 200: pageSchema(kind('run').responseSchema), ...errorResponses },
        },
      },
      async (req) => {
        const { projectId, parent } = await parentOf(req, parentKind, param);
        const { limit, cursor } = req.query as { limit: number; cursor?: string };
        const scope = `${req.tenant!.id}:${projectId}:run:${parent.id}`;
        const rows = await ctx.resources.list({
          tenantId: req.tenant!.id,
          projectId,
          kind: 'run',
          parentId: parent.id,
          afterSeq: ctx.cursors.decode(scope, cursor),
          limit: limit + 1,
        });
        return toPage(rows, limit, scope, ctx.cursors, (r) => r.data);
      },
    );
  runHistory('/api/v1/projects/:id/connectors/:connectorId/runs', 'connector', 'connectorId', 'Connector');
  runHistory('/api/v1/projects/:id/pipelines/:pipelineId/runs', 'pipeline', 'pipelineId', 'Pipeline');
  runHistory('/api/v1/projects/:id/dbt-projects/:dbtId/runs', 'dbt_project', 'dbtId', 'dbt project');

  app.get(
    '/api/v1/projects/:id/pipelines/:pipelineId/runs/:runId',
    {
      config: { settings: { permission: 'read-only', keys: 'own-project' } },
      schema: {
        tags: ['Pipeline'],
        operationId: 'get_pipeline_run',
        summary: 'Get run details and step status',
        params: params('id', 'pipelineId', 'runId'),
        response: { 200: kind('run').responseSchema, ...errorResponses },
      },
    },
    async (req) => {
      const { projectId, parent } = await parentOf(req, 'pipeline', 'pipelineId');
      const run = await ctx.resources.get(req.tenant!.id, projectId, 'run', (req.params as { runId: string }).runId);
      if (!run || run.parentId !== parent.id) throw notFound('Run');
      return run.data;
    },
  );

  const models = (dbt: Record<string, unknown>) => (dbt.models as DeclaredModel[]) ?? [];
  app.get(
    '/api/v1/projects/:id/dbt-projects/:dbtId/models',
    {
      config: { settings: { permission: 'read-only', keys: 'own-project' } },
      schema: {
        tags: ['dbt project'],
        operationId: 'list_dbt_models',
        summary: 'List models, dependencies first',
        params: params('id', 'dbtId'),
        querystring: pageQuerySchema,
        response: { 200: pageSchema(kind('model').responseSchema), ...errorResponses },
      },
    },
    async (req) => {
      const { parent } = await parentOf(req, 'dbt_project', 'dbtId');
      const { limit, cursor } = req.query as { limit: number; cursor?: string };
      const declared = models(parent.data);
      const byName = new Map(declared.map((m) => [m.name, m]));
      const order = topologicalOrder(declared.map((m) => ({ name: m.name, dependsOn: m.depends_on ?? [] })));
      // Models are few and derived, so the "sequence" of a model is its position in build order.
      const rows = order.map((name, i) => ({ seq: i + 1, model: byName.get(name)! }));
      const scope = `${req.tenant!.id}:${parent.id}:models`;
      const after = ctx.cursors.decode(scope, cursor);
      return toPage(rows.filter((r) => r.seq > after).slice(0, limit + 1), limit, scope, ctx.cursors, (r) => ({
        dbt_project_id: parent.id,
        ...r.model,
      }));
    },
  );

  app.get(
    '/api/v1/projects/:id/dbt-projects/:dbtId/lineage',
    {
      config: { settings: { permission: 'read-only', keys: 'own-project' } },
      schema: {
        tags: ['dbt project'],
        operationId: 'get_dbt_lineage',
        summary: 'Get the lineage graph (DAG)',
        params: params('id', 'dbtId'),
        response: { 200: kind('lineage_graph').responseSchema, ...errorResponses },
      },
    },
    async (req) => {
      const { parent } = await parentOf(req, 'dbt_project', 'dbtId');
      const nodes: { id: string; type: 'source' | 'model'; name: string; connector_id: string | null }[] = [];
      const edges: { from: string; to: string }[] = [];
      const seen = new Set<string>();
      for (const model of models(parent.data)) {
        nodes.push({ id: `model.${model.name}`, type: 'model', name: model.name, connector_id: null });
        for (const dep of model.depends_on ?? []) edges.push({ from: `model.${dep}`, to: `model.${model.name}` });
        for (const source of model.sources ?? []) {
          const id = `source.${source.connector_id}.${source.table}`;
          if (!seen.has(id)) nodes.push({ id, type: 'source', name: source.table, connector_id: source.connector_id });
          seen.add(id);
          edges.push({ from: id, to: `model.${model.name}` });
        }
      }
      return { dbt_project_id: parent.id, nodes, edges };
    },
  );

  const alertSchema = kind('alert').responseSchema as JsonSchema;
  app.get(
    '/api/v1/projects/:id/alerts',
    {
      config: { settings: { permission: 'read-only', keys: 'own-project' } },
      schema: {
        tags: ['Monitoring'],
        summary: 'List alerts; filter by status and severity',
        operationId: 'list_alerts',
        params: params('id'),
        querystring: {
          ...pageQuerySchema,
          properties: {
            ...pageQuerySchema.properties,
            status: { type: 'string', enum: ['firing', 'acknowledged', 'resolved'] },
            severity: { type: 'string', enum: ['info', 'warning', 'critical'] },
          },
        },
        response: { 200: pageSchema(alertSchema), ...errorResponses },
      },
    },
    async (req) => {
      const projectId = await resolveProject(ctx, req);
      const { limit, cursor, status, severity } = req.query as { limit: number; cursor?: string; status?: string; severity?: string };
      const where: Record<string, string> = {};
      if (status) where.status = status;
      if (severity) where.severity = severity;
      const scope = `${req.tenant!.id}:${projectId}:alert:${status ?? ''}:${severity ?? ''}`;
      const rows = await ctx.resources.list({
        tenantId: req.tenant!.id,
        projectId,
        kind: 'alert',
        where,
        afterSeq: ctx.cursors.decode(scope, cursor),
        limit: limit + 1,
      });
      return toPage(rows, limit, scope, ctx.cursors, (r) => r.data);
    },
  );

  const transition = (verb: 'acknowledge' | 'resolve', from: string[], to: 'acknowledged' | 'resolved') =>
    app.post(
      `/api/v1/projects/:id/alerts/:alertId/${verb}`,
      {
        config: { settings: { permission: 'read-write', keys: 'own-project', audit: { resourceType: 'alert', action: `alert.${verb}` } } },
        schema: {
          tags: ['Monitoring'],
          operationId: `${verb}_alert`,
          summary: `${verb[0].toUpperCase()}${verb.slice(1)} an alert`,
          params: params('id', 'alertId'),
          response: { 200: alertSchema, ...errorResponses },
        },
      },
      async (req) => {
        const projectId = await resolveProject(ctx, req);
        const alertId = (req.params as { alertId: string }).alertId;
        req.auditDetails = { projectId, resourceId: alertId };
        const data = await ctx.db.tx(async (q) => {
          // Locked first, so of two concurrent transitions the second sees the first's outcome.
          if (!(await lockRow(ctx, q, req.tenant!.id, alertId))) throw notFound('Alert');
          const alert = await ctx.resources.get(req.tenant!.id, projectId, 'alert', alertId, q);
          if (!alert) throw notFound('Alert');
          const status = String(alert.data.status);
          if (!from.includes(status)) throw conflict(`Alert is ${status}; only ${from.join(' or ')} alerts can be ${verb}d`);
          const before = { status };
          alert.data.status = to;
          alert.data[`${to}_at`] = nowIso(ctx.options.clock);
          alert.data[`${to}_by`] = req.actor!.name;
          await ctx.resources.update(alert, q);
          await afterAlertTransition(q, alert.data, to);
          req.auditDetails!.diff = { status: { before: before.status, after: to } };
          return alert.data;
        });
        // After the commit: the alert stream (and anything else listening) hears of the transition.
        runtimeOf(ctx).events.emit('alert_update', req.tenant!.id, data);
        return data;
      },
    );
  transition('acknowledge', ['firing'], 'acknowledged');
  transition('resolve', ['firing', 'acknowledged'], 'resolved');
}
