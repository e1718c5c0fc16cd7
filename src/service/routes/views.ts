import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceContext } from '../context.js';
import { kind, type JsonSchema } from '../../kinds/index.js';
import { errorResponses, pageQuerySchema, pageSchema } from './crud.js';
import { lockRow } from '../writes.js';
import { resolveProject } from './scope.js';
import { PAGE_BYTES, SCAN_WINDOW, toJsonPage, toPage } from '../pagination.js';
import { conflict, notFound, unauthorized } from '../errors.js';
import { nowIso } from '../ids.js';
import { topologicalOrder } from '../../kinds/dag.js';
import { runtimeOf } from '../runtime/runtime.js';
import { afterAlertTransition } from '../runtime/alerts.js';

/** A model as a dbt project declares it (the dbt_project kind's `models`). */
export interface DeclaredModel {
  name: string;
  materialization: string;
  depends_on: string[];
  sources: { connector_id: string; table: string }[];
}

export interface LineageGraph {
  nodes: { id: string; type: 'source' | 'model'; name: string; connector_id: string | null }[];
  edges: { from: string; to: string }[];
}

const params = (...names: string[]) => ({ type: 'object', properties: Object.fromEntries(names.map((n) => [n, { type: 'string' }])) });

const declaredModels = (dbt: Record<string, unknown>) => (dbt.models as DeclaredModel[]) ?? [];

/** Models in build order (dependencies first), each with its position in that order from 1: its page sequence. */
export function modelsInBuildOrder(declared: DeclaredModel[]): { seq: number; model: DeclaredModel }[] {
  const byName = new Map(declared.map((m) => [m.name, m]));
  const order = topologicalOrder(declared.map((m) => ({ name: m.name, dependsOn: m.depends_on ?? [] })));
  return order.map((name, i) => ({ seq: i + 1, model: byName.get(name)! }));
}

/** The lineage DAG of a dbt project's models: a node per model and per source table, an edge per dependency. */
export function lineageGraph(models: DeclaredModel[]): LineageGraph {
  const nodes: LineageGraph['nodes'] = [];
  const edges: LineageGraph['edges'] = [];
  const seen = new Set<string>();
  for (const model of models) {
    nodes.push({ id: `model.${model.name}`, type: 'model', name: model.name, connector_id: null });
    for (const dep of model.depends_on ?? []) edges.push({ from: `model.${dep}`, to: `model.${model.name}` });
    for (const source of model.sources ?? []) {
      const id = `source.${source.connector_id}.${source.table}`;
      if (!seen.has(id)) nodes.push({ id, type: 'source', name: source.table, connector_id: source.connector_id });
      seen.add(id);
      edges.push({ from: id, to: `model.${model.name}` });
    }
  }
  return { nodes, edges };
}

export type AlertVerb = 'acknowledge' | 'resolve';
export type AlertOutcome = 'acknowledged' | 'resolved';

/**
 * Moves an alert's data to `to`, stamped with when and by whom; refuses (409) an alert whose
 * status is not one of `from`. Answers the status it had.
 */
export function transitionAlert(
  data: Record<string, unknown>,
  t: { verb: AlertVerb; from: string[]; to: AlertOutcome },
  at: string,
  by: string,
): string {
  const status = String(data.status);
  if (!t.from.includes(status)) throw conflict(`Alert is ${status}; only ${t.from.join(' or ')} alerts can be ${t.verb}d`);
  data.status = t.to;
  data[`${t.to}_at`] = at;
  data[`${t.to}_by`] = by;
  return status;
}

/** A parent resource (connector, pipeline, dbt project) of the project the path names, or a 404. */
type ParentOf = (
  req: FastifyRequest,
  parentKind: string,
  param: string,
) => Promise<{ projectId: string; parent: NonNullable<Awaited<ReturnType<ServiceContext['resources']['get']>>> }>;

const parentLookup =
  (ctx: ServiceContext): ParentOf =>
  async (req, parentKind, param) => {
    const projectId = await resolveProject(ctx, req);
    const id = (req.params as Record<string, string>)[param];
    const parent = await ctx.resources.get(req.tenant!.id, projectId, parentKind, id);
    if (!parent) throw notFound(kind(parentKind).title);
    return { projectId, parent };
  };

/** The run history of connectors, pipelines and dbt projects, and one pipeline run. */
/**
 * A page of a resource's run history as stored JSON (runs hold no secrets), ending early at
 * PAGE_BYTES: a run of a 10,000-table sync is about 2 MB, and 100 made one answer of 200 MB.
 */
export async function runHistoryPage(ctx: ServiceContext, req: FastifyRequest, reply: FastifyReply, projectId: string, parentId: string) {
  const { limit, cursor } = req.query as { limit: number; cursor?: string };
  const scope = `${req.tenant!.id}:${projectId}:run:${parentId}`;
  const query = { tenantId: req.tenant!.id, projectId, kind: 'run', parentId, afterSeq: ctx.cursors.decode(scope, cursor) };
  const bounded = await ctx.resources.listJsonPageWithin(query, limit, PAGE_BYTES);
  reply.type('application/json');
  return toJsonPage(bounded.page, bounded.limit, scope, ctx.cursors);
}

function registerRunViews(app: FastifyInstance, ctx: ServiceContext, parentOf: ParentOf) {
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
      async (req, reply) => {
        const { projectId, parent } = await parentOf(req, parentKind, param);
        return runHistoryPage(ctx, req, reply, projectId, parent.id);
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
}

/** A dbt project's models (build order) and lineage graph, derived from its declaration. */
function registerDbtViews(app: FastifyInstance, ctx: ServiceContext, parentOf: ParentOf) {
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
      // Models are few and derived, so the "sequence" of a model is its position in build order.
      const rows = modelsInBuildOrder(declaredModels(parent.data));
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
      const { nodes, edges } = lineageGraph(declaredModels(parent.data));
      return { dbt_project_id: parent.id, nodes, edges };
    },
  );
}

/** A project's alerts, filtered by status and severity. */
function registerAlertList(app: FastifyInstance, ctx: ServiceContext, alertSchema: JsonSchema) {
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
      const list = { tenantId: req.tenant!.id, projectId, kind: 'alert', afterSeq: ctx.cursors.decode(scope, cursor) };
      // A filtered page examines at most SCAN_WINDOW alerts, and ends where they do.
      const windowEnd = status || severity ? await ctx.resources.scanWindowEnd(list, SCAN_WINDOW) : undefined;
      const rows = await ctx.resources.list({ ...list, where, throughSeq: windowEnd, limit: limit + 1 });
      return toPage(rows, limit, scope, ctx.cursors, (r) => r.data, windowEnd === undefined || rows.length > limit ? undefined : windowEnd);
    },
  );
}

/** POST .../alerts/{alertId}/{verb}: one state transition of an alert, audited and streamed. */
function registerAlertTransition(
  app: FastifyInstance,
  ctx: ServiceContext,
  alertSchema: JsonSchema,
  t: { verb: AlertVerb; from: string[]; to: AlertOutcome },
) {
  const { verb, to } = t;
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
        // As every write: a credential revoked elsewhere (and still remembered by this replica for up to 1 s) cannot write.
        if (!(await ctx.auth.stillValid(req.actor!, q))) throw unauthorized('Credential was revoked during the request');
        const before = transitionAlert(alert.data, t, nowIso(ctx.options.clock), req.actor!.name);
        await ctx.resources.update(alert, q);
        await afterAlertTransition(q, alert.data, to);
        req.auditDetails!.diff = { status: { before, after: to } };
        return alert.data;
      });
      // After the commit: the alert stream (and anything else listening) hears of the transition.
      runtimeOf(ctx).events.emit('alert_update', req.tenant!.id, data);
      return data;
    },
  );
}

/** Read-only views and state transitions that are not plain CRUD: run history, models, lineage, alerts. */
export function registerViewRoutes(app: FastifyInstance, ctx: ServiceContext) {
  const parentOf = parentLookup(ctx);
  registerRunViews(app, ctx, parentOf);
  registerDbtViews(app, ctx, parentOf);
  const alertSchema = kind('alert').responseSchema as JsonSchema;
  registerAlertList(app, ctx, alertSchema);
  registerAlertTransition(app, ctx, alertSchema, { verb: 'acknowledge', from: ['firing'], to: 'acknowledged' });
  registerAlertTransition(app, ctx, alertSchema, { verb: 'resolve', from: ['firing', 'acknowledged'], to: 'resolved' });
}
