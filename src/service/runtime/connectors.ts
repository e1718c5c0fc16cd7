import type { Queryable } from '../store/db.js';
import type { StoredResource } from '../store/resources.js';
import { conflict, notFound } from '../errors.js';
import { Stopped, type Runtime } from './runtime.js';
import { egressPolicy } from '../egress.js';
import { slicedStringify } from './sliced-json.js';
import {
  guarded,
  inProject,
  insertRun,
  pendingUnit,
  RunRecorder,
  runningRunOf,
  skipPending,
  updateResource,
  type RunData,
  type TableResult,
  type Trigger,
} from './runs.js';
import {
  countRows,
  setStatementTimeout,
  describeError,
  discoverPostgres,
  isReal,
  simulatedDiscovery,
  simulatedRows,
  simulatedSyncSeconds,
  simulatedTest,
  SourceError,
  sourceSettings,
  tablesToSync,
  testPostgres,
  connectPostgres,
  type DiscoveredTable,
  type SourceSettings,
} from './sources.js';

/** Runs a call to the source; its failures become SourceErrors with a message for the user. */
async function source<T>(s: SourceSettings, timeoutSeconds: number, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (signal?.aborted) throw new Stopped();
    if (err instanceof Stopped) throw err;
    throw new SourceError(describeError(err, s, timeoutSeconds));
  }
}

/** POST .../test: a failed connection is an answer (success false), not an HTTP error. */
export async function testConnector(rt: Runtime, connector: StoredResource): Promise<{ success: boolean; message: string }> {
  const s = sourceSettings(connector);
  const timeout = rt.ctx.options.sourceTimeout;
  if (!isReal(s)) return { success: true, message: simulatedTest(s) };
  try {
    return { success: true, message: await testPostgres(s, timeout, egressPolicy(rt.ctx.options)) };
  } catch (err) {
    return { success: false, message: describeError(err, s, timeout) };
  }
}

export interface DiscoveredSchema {
  connector_id: string;
  discovered_at: string | null;
  error: string | null;
  tables: DiscoveredTable[];
}

/** How long an unchanged discovery is answered as stored instead of written again. */
const UNCHANGED_DISCOVERY_MS = 60_000;

/** Discovered schemas are stored as rows of their own (kind discovered_schema, parent the connector), apart from the connector's API view. */
const discoveryId = (connectorId: string) => `dsc_${connectorId}`;

/**
 * Where a stored discovery's tables begin: they are written last (jsonChunks), and outside a string
 * (where every quote is escaped) this text can only be that key.
 */
const TABLES_KEY = ',"tables":';

/**
 * A stored discovery's JSON text, split where its tables begin: the rest parsed, the tables kept as
 * text. A discovery of 100,000 columns is 5 MB, whose JSON.parse held every request for 0.2 s.
 */
function splitStored(json: string): { head: Omit<DiscoveredSchema, 'tables'>; tablesJson: string } | undefined {
  const at = json.indexOf(TABLES_KEY);
  if (at < 0 || !json.endsWith('}')) return undefined;
  return { head: JSON.parse(`${json.slice(0, at)}}`), tablesJson: json.slice(at + TABLES_KEY.length, -1) };
}

/**
 * GET .../schema: reads the source's tables and columns again and stores them. When the source
 * cannot be read, the answer keeps the last tables found, with `error` saying why they could not be refreshed.
 * Up to MAX_DISCOVERED_COLUMNS columns: read in batches, written as JSON in slices, and compared with the
 * stored discovery as text, so no step holds the event loop for the whole schema.
 */
export async function discoverSchema(rt: Runtime, connector: StoredResource): Promise<DiscoveredSchema> {
  const s = sourceSettings(connector);
  const timeout = rt.ctx.options.sourceTimeout;
  const previousJson = await rt.ctx.resources.getDataJson(
    connector.tenantId,
    connector.projectId,
    'discovered_schema',
    discoveryId(connector.id),
  );
  const previous = previousJson === undefined ? undefined : splitStored(previousJson);
  let data: DiscoveredSchema;
  try {
    const tables = isReal(s) ? await discoverPostgres(s, timeout, egressPolicy(rt.ctx.options)) : simulatedDiscovery(s);
    data = { connector_id: connector.id, discovered_at: rt.now(), error: null, tables };
  } catch (err) {
    // Only here are the stored tables parsed: they are the answer.
    const tables = previousJson ? (JSON.parse(previousJson) as DiscoveredSchema).tables : [];
    data = {
      connector_id: connector.id,
      discovered_at: previous?.head.discovered_at ?? null,
      error: describeError(err, s, timeout),
      tables,
    };
  }
  const json = await slicedStringify(data, 'tables');
  // The same tables found again within a minute of the stored discovery: answered as stored, so polling
  // this GET costs the source a read but the database no write (at most one a minute per connector).
  if (
    previous &&
    previous.head.error === null &&
    data.error === null &&
    rt.nowMs() - Date.parse(String(previous.head.discovered_at)) < UNCHANGED_DISCOVERY_MS &&
    previous.tablesJson === splitStored(json)?.tablesJson
  ) {
    return { ...data, discovered_at: previous.head.discovered_at };
  }
  await storeDiscovery(rt, connector, data, json);
  return data;
}

/** Writes a discovery (`json`, its JSON text) as the connector's discovered_schema row, unless the connector is gone. */
async function storeDiscovery(rt: Runtime, connector: StoredResource, data: DiscoveredSchema, json: string) {
  const { tenantId, projectId } = connector;
  const row = {
    id: discoveryId(connector.id),
    tenantId,
    projectId,
    kind: 'discovered_schema',
    parentId: connector.id,
    name: connector.id,
    data: data as unknown as Record<string, unknown>,
    secrets: null,
  };
  await inProject(rt, tenantId, projectId, async (q) => {
    if (!(await rt.ctx.resources.exists(tenantId, projectId, 'connector', connector.id, q))) return;
    if (await rt.ctx.resources.exists(tenantId, projectId, 'discovered_schema', row.id, q)) await rt.ctx.resources.update(row, q, json);
    else await rt.ctx.resources.insert(row, q, json);
  });
}

export interface StartSync {
  tenantId: string;
  projectId: string;
  connectorId: string;
  trigger: Trigger;
  parentRunId?: string | null;
  /** Extra checks in the trigger's transaction (the caller's credential is still valid). */
  inTx?: (q: Queryable) => Promise<void>;
}

export interface Started {
  run: RunData;
  /** The run as it ended; undefined when the service stopped first. */
  done: Promise<RunData | undefined>;
}

/**
 * Starts a sync: created/active/error -> syncing, a running run, in one transaction. A connector
 * already syncing is 409. The sync itself runs in the background (runSync).
 */
export async function startConnectorSync(rt: Runtime, o: StartSync): Promise<Started> {
  const slot = rt.runSlots.take(o.tenantId, o.parentRunId);
  const { stored, connector } = await inProject(rt, o.tenantId, o.projectId, async (q) => {
    await o.inTx?.(q);
    const connector = await rt.ctx.resources.get(o.tenantId, o.projectId, 'connector', o.connectorId, q);
    if (!connector) throw notFound('Connector');
    if (connector.data.status === 'syncing') {
      const running = await runningRunOf(rt, q, o.tenantId, o.projectId, connector.id);
      throw conflict(`Connector "${connector.name}" is already syncing${running ? ` (run ${running.id})` : ''}; wait for that sync to end`);
    }
    const s = sourceSettings(connector);
    const tables: TableResult[] = s.selectedTables.map((table) => ({ table, rows: null, ...pendingUnit() }));
    const stored = await insertRun(rt, q, {
      tenantId: o.tenantId,
      projectId: o.projectId,
      parentId: connector.id,
      runType: 'connector_sync',
      trigger: o.trigger,
      parentRunId: o.parentRunId,
      simulated: !isReal(s),
      tables,
    });
    connector.data.status = 'syncing';
    await rt.ctx.resources.updateComputed(connector, q);
    return { stored, connector };
  }).catch(slot.failedToStart);
  const done = rt.execute(stored.id, slot, (signal) => {
    // Coalesced: each table's progress rewrote the whole run (every table in it), twice per table.
    const rec = new RunRecorder(rt, stored, signal, { progress: 'coalesced' });
    return guarded(
      rec,
      () => runSync(rt, rec, connector),
      (q) => settleConnector(rt, q, rec, true),
    );
  });
  return { run: structuredClone(stored.data as RunData), done };
}

/** One sync: per table, SELECT count(*) on the real source (postgresql) or a simulated count. */
async function runSync(rt: Runtime, rec: RunRecorder, connector: StoredResource): Promise<RunData> {
  const s = sourceSettings(connector);
  const timeout = rt.ctx.options.sourceTimeout;
  const tables = rec.data.tables;
  let error: string | null = null;
  try {
    if (isReal(s)) {
      // Only calls to the source are wrapped: a failure of the service's own store is not the source's fault.
      const client = await source(s, timeout, () => connectPostgres(s, timeout, egressPolicy(rt.ctx.options), rec.signal), rec.signal);
      const queryTimeout = rt.ctx.options.sourceQueryTimeout;
      const onAbort = () => void client.end().catch(() => undefined);
      rec.signal.addEventListener('abort', onAbort, { once: true });
      try {
        // A count on a huge or locked table must not hold the run (and its connector) forever.
        await source(s, timeout, () => setStatementTimeout(client, queryTimeout), rec.signal);
        if (!tables.length) {
          for (const table of await source(s, timeout, () => tablesToSync(client, s), rec.signal))
            tables.push({ table, rows: null, ...pendingUnit() });
          await rec.save();
        }
        for (const t of tables) {
          await rec.begin(t);
          try {
            t.rows = await source(s, queryTimeout, () => countRows(client, s, t.table), rec.signal);
            await rec.end(t, 'completed');
          } catch (err) {
            if (!(err instanceof SourceError)) throw err;
            await rec.end(t, 'failed', err.message);
          }
        }
      } finally {
        rec.signal.removeEventListener('abort', onAbort);
        await client.end().catch(() => undefined);
      }
    } else {
      for (const t of tables) {
        await rec.begin(t);
        const seconds = simulatedSyncSeconds(t.table);
        await rt.simulate(seconds, rec.signal);
        t.rows = simulatedRows(t.table);
        await rec.end(t, 'completed', null, seconds);
      }
    }
    const failed = tables.filter((t) => t.status === 'failed');
    if (failed.length)
      error = `${failed.length} of ${tables.length} tables failed: ${failed.map((t) => `${t.table}: ${t.error}`).join('; ')}`;
  } catch (err) {
    if (!(err instanceof SourceError)) throw err;
    // The source could not be reached at all: nothing was read.
    error = err.message;
    for (const t of tables) if (t.status === 'running') t.status = 'failed';
    skipPending(tables);
  }
  return rec.finish(error ? 'failed' : 'succeeded', error, (q) => settleConnector(rt, q, rec, !!error));
}

/**
 * syncing -> active after a successful sync, -> error after a failed one (last_error says why);
 * last_sync_at and last_sync_started_at either way (the start says which settings the sync proved).
 */
async function settleConnector(rt: Runtime, q: Queryable, rec: RunRecorder, failed: boolean): Promise<void> {
  await updateResource(rt, q, rec.stored.tenantId, rec.stored.projectId, 'connector', rec.stored.parentId, (d) => {
    d.status = failed ? 'error' : 'active';
    d.last_error = failed ? (rec.data.error ?? 'the sync failed') : null;
    d.last_sync_at = rec.data.finished_at;
    d.last_sync_started_at = rec.data.started_at;
  });
}
