import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceContext, RouteSettings } from '../context.js';
import type { Queryable } from '../store/db.js';
import { kind } from '../../kinds/index.js';
import { errorResponses, pageQuerySchema, pageSchema } from './crud.js';
import { resolveProject } from './scope.js';
import { runHistoryPage } from './views.js';
import { ApiError, notFound, unauthorized } from '../errors.js';
import { runtimeOf, type Runtime } from '../runtime/runtime.js';
import { recoverAbandonedRuns } from '../runtime/recovery.js';
import { discoverSchema, startConnectorSync, testConnector } from '../runtime/connectors.js';
import { startPipelineRun } from '../runtime/pipelines.js';
import { startDbtRun } from '../runtime/dbt.js';
import { applyInfrastructure, planInfrastructure } from '../runtime/infrastructure.js';
import { installScheduler } from '../runtime/scheduler.js';
import { installRetention } from '../runtime/retention.js';
import { classifySchema } from '../runtime/classify.js';
import { slicedJsonBody } from '../runtime/sliced-json.js';
import type { Started } from '../runtime/connectors.js';
import { BackgroundLog } from '../runtime/background-log.js';

const params = (...names: string[]) => ({ type: 'object', properties: Object.fromEntries(names.map((n) => [n, { type: 'string' }])) });

/** A path parameter of the request. */
const param = (req: FastifyRequest, name: string) => (req.params as Record<string, string>)[name];

const write = (resourceType: string, action: string): { settings: RouteSettings } => ({
  settings: { permission: 'read-write', keys: 'own-project', audit: { resourceType, action } },
});
const read: { settings: RouteSettings } = { settings: { permission: 'read-only', keys: 'own-project' } };

/** What a trigger answers: the run it created. */
const trigger = (run: { id: string; status: string; started_at: string }) => ({
  run_id: run.id,
  status: run.status,
  started_at: run.started_at,
});

/** The project and the resource named by a path parameter, or 404. */
async function load(ctx: ServiceContext, req: FastifyRequest, resourceKind: string, name: string) {
  const projectId = await resolveProject(ctx, req);
  const found = await ctx.resources.get(req.tenant!.id, projectId, resourceKind, param(req, name));
  if (!found) throw notFound(kind(resourceKind).title);
  return { projectId, found };
}

/** In a trigger's transaction: a credential revoked while the request was in flight must not start anything. */
const stillValid = (ctx: ServiceContext, req: FastifyRequest) => async (q: Queryable) => {
  if (!(await ctx.auth.stillValid(req.actor!, q))) throw unauthorized('Credential was revoked during the request');
};

/**
 * Aborts when the caller's connection closes before the answer is written: work for an answer
 * nobody will read stops (a schema read abandoned by its client went on for minutes of CPU).
 */
function callerGone(reply: FastifyReply): AbortSignal {
  const gone = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) gone.abort(new ApiError('internal_error', 'The caller went away', undefined, 499));
  });
  return gone.signal;
}

/**
 * The runtime's operations: connection tests, schema discovery, sync and run triggers,
 * infrastructure plan and apply (src/service/runtime/). Triggers need read-write and are
 * audited; reads need read-only. Every trigger answers 201 with the run it created.
 */
export function registerRuntimeRoutes(app: FastifyInstance, ctx: ServiceContext) {
  const rt = attachRuntime(app, ctx);
  registerConnectorRoutes(app, rt);
  registerRunReads(app, ctx);
  registerRunTriggers(app, rt);
  registerInfrastructureRoutes(app, rt);
}

/** The service's runtime, started when the service is ready (recovering abandoned runs) and stopped when it closes. */
function attachRuntime(app: FastifyInstance, ctx: ServiceContext): Runtime {
  if (!(ctx.options.timeScale > 0)) throw new Error(`timeScale must be above 0, got ${ctx.options.timeScale}`);
  if (!(ctx.options.sourceTimeout > 0)) throw new Error(`sourceTimeout must be above 0, got ${ctx.options.sourceTimeout}`);
  const rt = runtimeOf(ctx);
  rt.log = new BackgroundLog(app.log);
  app.addHook('onReady', async () => rt.start(recoverAbandonedRuns));
  app.addHook('onClose', async () => rt.stop());
  installScheduler(app, rt);
  installRetention(app, rt);
  return rt;
}

// --- Connectors -----------------------------------------------------------------------------------

function registerConnectorRoutes(app: FastifyInstance, rt: Runtime) {
  const { ctx } = rt;
  app.post(
    '/api/v1/projects/:id/connectors/:connectorId/test',
    {
      config: write('connector', 'connector.test'),
      schema: {
        tags: ['Connector'],
        operationId: 'test_connector',
        summary: 'Test the connection',
        description:
          "Connects to the source with the connector's config and stored credentials (postgresql for real, within the service's source timeout; other types are simulated). " +
          'A failed connection is still 200, with success false and the reason: host unreachable, authentication failed, database or schema does not exist, timeout.',
        params: params('id', 'connectorId'),
        response: { 200: kind('connection_test').responseSchema, ...errorResponses },
      },
    },
    async (req) => {
      const { projectId, found } = await load(ctx, req, 'connector', 'connectorId');
      req.auditDetails = { projectId, resourceId: found.id, resourceName: found.name };
      const result = await testConnector(rt, found);
      req.auditDetails.diff = { success: { before: null, after: result.success } };
      return result;
    },
  );

  app.post(
    '/api/v1/projects/:id/connectors/:connectorId/sync',
    {
      config: write('connector', 'connector.sync'),
      schema: {
        tags: ['Connector'],
        operationId: 'sync_connector',
        summary: 'Trigger a manual sync',
        description:
          'Creates a run (201) that counts the rows of each selected table in the background (every table of the schema when none are selected); the connector goes syncing, then active or error. ' +
          'A connector already syncing is 409. Progress and results: GET .../runs.',
        params: params('id', 'connectorId'),
        response: { 201: kind('run_trigger').responseSchema, ...errorResponses },
      },
    },
    async (req, reply) => {
      const { projectId, found } = await load(ctx, req, 'connector', 'connectorId');
      req.auditDetails = { projectId, resourceId: found.id, resourceName: found.name };
      const { run } = await startConnectorSync(rt, {
        tenantId: req.tenant!.id,
        projectId,
        connectorId: found.id,
        trigger: 'manual',
        inTx: stillValid(ctx, req),
      });
      req.auditDetails.diff = { status: { before: found.data.status, after: 'syncing' }, run_id: { before: null, after: run.id } };
      reply.code(201);
      return trigger(run);
    },
  );

  app.get(
    '/api/v1/projects/:id/connectors/:connectorId/schema',
    {
      config: read,
      schema: {
        tags: ['Connector'],
        operationId: 'get_connector_schema',
        summary: 'Get the discovered schema',
        description:
          "Reads the source's tables and columns (information_schema) and stores them. When the source cannot be read, answers the tables found last, with error saying why.",
        params: params('id', 'connectorId'),
        response: { 200: kind('discovered_schema').responseSchema, ...errorResponses },
      },
    },
    async (req, reply) => {
      const { found } = await load(ctx, req, 'connector', 'connectorId');
      const schema = await classifySchema(rt, found, await discoverSchema(rt, found), callerGone(reply));
      reply.type('application/json');
      // Up to MAX_DISCOVERED_COLUMNS columns with their marks: written a table at a time.
      return slicedJsonBody(schema, 'tables');
    },
  );
}

/** GET one run of a connector or dbt project (the spec has a get-one only for pipeline runs). */
function registerRunReads(app: FastifyInstance, ctx: ServiceContext) {
  if (ctx.options.strictSpec) return;
  const getRun = (path: string, parentKind: string, parentParam: string, tag: string) =>
    app.get(
      path,
      {
        config: read,
        schema: {
          tags: [tag],
          operationId: `get_${parentKind}_run`,
          summary: 'Get one run',
          'x-extension': true,
          params: params('id', parentParam, 'runId'),
          response: { 200: kind('run').responseSchema, ...errorResponses },
        } as Record<string, unknown>,
      },
      async (req) => {
        const { projectId, found } = await load(ctx, req, parentKind, parentParam);
        const run = await ctx.resources.get(req.tenant!.id, projectId, 'run', param(req, 'runId'));
        if (!run || run.parentId !== found.id) throw notFound('Run');
        return run.data;
      },
    );
  getRun('/api/v1/projects/:id/connectors/:connectorId/runs/:runId', 'connector', 'connectorId', 'Connector');
  getRun('/api/v1/projects/:id/dbt-projects/:dbtId/runs/:runId', 'dbt_project', 'dbtId', 'dbt project');
}

// --- Pipelines and dbt ----------------------------------------------------------------------------

/** A run trigger of a pipeline or dbt project: both go `last_run_status` running and answer the run. */
interface RunTrigger {
  path: string;
  parentKind: 'pipeline' | 'dbt_project';
  parentParam: string;
  tag: string;
  operationId: string;
  description: string;
  start: (rt: Runtime, o: { tenantId: string; projectId: string; id: string; inTx: (q: Queryable) => Promise<void> }) => Promise<Started>;
}

const RUN_TRIGGERS: RunTrigger[] = [
  {
    path: '/api/v1/projects/:id/pipelines/:pipelineId/run',
    parentKind: 'pipeline',
    parentParam: 'pipelineId',
    tag: 'Pipeline',
    operationId: 'run_pipeline',
    description:
      'Creates a run (201) that executes the steps in dependency order, independent steps concurrently; the steps after a failed one are skipped. ' +
      'A disabled pipeline, or one already running, is 409. Step status: GET .../runs/{runId}.',
    start: (rt, { id, ...o }) => startPipelineRun(rt, { ...o, pipelineId: id, trigger: 'manual' }),
  },
  {
    path: '/api/v1/projects/:id/dbt-projects/:dbtId/run',
    parentKind: 'dbt_project',
    parentParam: 'dbtId',
    tag: 'dbt project',
    operationId: 'run_dbt_project',
    description:
      'Creates a run (201) that builds the declared models one at a time in topological order (simulated durations); a model whose source connector is in error fails, and the models downstream of it are skipped. ' +
      'A dbt project already running is 409.',
    start: (rt, { id, ...o }) => startDbtRun(rt, { ...o, dbtProjectId: id, trigger: 'manual' }),
  },
];

function registerRunTriggers(app: FastifyInstance, rt: Runtime) {
  const { ctx } = rt;
  for (const t of RUN_TRIGGERS) {
    app.post(
      t.path,
      {
        config: write(t.parentKind, `${t.parentKind}.run`),
        schema: {
          tags: [t.tag],
          operationId: t.operationId,
          summary: 'Trigger a run',
          description: t.description,
          params: params('id', t.parentParam),
          response: { 201: kind('run_trigger').responseSchema, ...errorResponses },
        },
      },
      async (req, reply) => {
        const { projectId, found } = await load(ctx, req, t.parentKind, t.parentParam);
        req.auditDetails = { projectId, resourceId: found.id, resourceName: found.name };
        const { run } = await t.start(rt, { tenantId: req.tenant!.id, projectId, id: found.id, inTx: stillValid(ctx, req) });
        req.auditDetails.diff = {
          last_run_status: { before: found.data.last_run_status ?? null, after: 'running' },
          run_id: { before: null, after: run.id },
        };
        reply.code(201);
        return trigger(run);
      },
    );
  }
}

// --- Infrastructure -------------------------------------------------------------------------------

function registerInfrastructureRoutes(app: FastifyInstance, rt: Runtime) {
  const { ctx } = rt;
  app.post(
    '/api/v1/projects/:id/infrastructure/plan',
    {
      config: write('infrastructure_resource', 'infrastructure_resource.plan'),
      schema: {
        tags: ['Infrastructure resource'],
        operationId: 'plan_infrastructure',
        summary: 'Generate an infrastructure-as-code plan (preview of changes)',
        description:
          'The changes (create, update, delete, with before and after) between the resources as configured and as last applied. Changes nothing. The same state always gives the same plan_id.',
        params: params('id'),
        response: { 200: kind('infrastructure_plan').responseSchema, ...errorResponses },
      },
    },
    async (req, reply) => {
      const projectId = await resolveProject(ctx, req);
      const plan = await rt.heavyReads.run(req.tenant!.id, () => planInfrastructure(rt, req.tenant!.id, projectId));
      req.auditDetails = { projectId, diff: { plan_id: { before: null, after: plan.plan_id } } };
      // Written a change at a time: 5,000 resources at their config cap are a 105 MB answer, which
      // the serializer wrote in one piece, holding every tenant's requests 1.3 s.
      reply.type('application/json');
      return slicedJsonBody(plan, 'changes');
    },
  );

  app.post(
    '/api/v1/projects/:id/infrastructure/apply',
    {
      config: write('infrastructure_resource', 'infrastructure_resource.apply'),
      // The body is optional: no body applies the current plan.
      preValidation: async (req) => {
        if (req.body === undefined || req.body === null) req.body = {};
      },
      schema: {
        tags: ['Infrastructure resource'],
        operationId: 'apply_infrastructure',
        summary: 'Apply the current plan',
        description:
          "Creates a run (201) that provisions the plan's changes in the background (simulated): pending -> provisioning -> provisioned, provisioned -> updating -> provisioned; deletions leave the provisioned snapshot. " +
          'With {"plan_id"}, that plan must still be current, else 409 (stale plan); without a body, the current plan is applied. One apply per project at a time (409). ' +
          'A plan without changes gives a run that has already succeeded.',
        params: params('id'),
        'x-body-optional': true,
        body: {
          type: 'object',
          additionalProperties: false,
          properties: { plan_id: { type: 'string', minLength: 1, description: 'The plan reviewed (from POST .../plan).' } },
        },
        response: { 201: kind('infrastructure_apply').responseSchema, ...errorResponses },
      },
    },
    async (req, reply) => {
      const projectId = await resolveProject(ctx, req);
      const planId = (req.body as { plan_id?: string } | undefined)?.plan_id;
      req.auditDetails = { projectId };
      const { run, plan } = await applyInfrastructure(rt, { tenantId: req.tenant!.id, projectId, planId, inTx: stillValid(ctx, req) });
      req.auditDetails.diff = { plan_id: { before: null, after: plan.plan_id }, run_id: { before: null, after: run.id } };
      reply.code(201).type('application/json');
      return slicedJsonBody({ ...trigger(run), plan_id: plan.plan_id, changes: plan.changes }, 'changes');
    },
  );

  if (!ctx.options.strictSpec) registerInfrastructureRunReads(app, rt);
}

/** The applies of a project (runs whose parent is the project itself): extensions of the spec. */
function registerInfrastructureRunReads(app: FastifyInstance, rt: Runtime) {
  const { ctx } = rt;
  app.get(
    '/api/v1/projects/:id/infrastructure/runs',
    {
      config: read,
      schema: {
        tags: ['Infrastructure resource'],
        operationId: 'list_infrastructure_runs',
        summary: 'List infrastructure applies, newest last',
        'x-extension': true,
        params: params('id'),
        querystring: pageQuerySchema,
        response: { 200: pageSchema(kind('run').responseSchema), ...errorResponses },
      } as Record<string, unknown>,
    },
    async (req, reply) => {
      const projectId = await resolveProject(ctx, req);
      // An apply's parent is its project.
      return runHistoryPage(ctx, req, reply, projectId, projectId);
    },
  );
  app.get(
    '/api/v1/projects/:id/infrastructure/runs/:runId',
    {
      config: read,
      schema: {
        tags: ['Infrastructure resource'],
        operationId: 'get_infrastructure_run',
        summary: 'Get one infrastructure apply',
        'x-extension': true,
        params: params('id', 'runId'),
        response: { 200: kind('run').responseSchema, ...errorResponses },
      } as Record<string, unknown>,
    },
    async (req) => {
      const projectId = await resolveProject(ctx, req);
      const run = await ctx.resources.get(req.tenant!.id, projectId, 'run', param(req, 'runId'));
      if (!run || run.parentId !== projectId) throw notFound('Run');
      return run.data;
    },
  );
}
