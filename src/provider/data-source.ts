import { ApiError, type DataPlatformClient, type RunOwner } from '../client/index.js';
import { kind } from '../kinds/index.js';
import type { ListCache } from './list-cache.js';
import { ProviderError } from './resource.js';
import { objectToTf, type DataSourceSpec, type ViewSpec } from './schema.js';
import { UNKNOWN, type TfObject, type TfValue } from './values.js';

const given = (v: TfValue | undefined): v is string => typeof v === 'string' && v !== '';

/**
 * Reads a data source: a writable kind looked up by its identity (from this run's listing of
 * the collection, so N lookups of a kind in a project cost one list), or a read-only view.
 */
export class DataSourceHandler {
  constructor(
    readonly spec: DataSourceSpec,
    private readonly client: () => DataPlatformClient,
    private readonly cache: ListCache,
  ) {}

  /** Config errors Terraform shows at validate time, by attribute. */
  validate(config: TfObject | null): { attribute: string; summary: string }[] {
    const source = this.spec.source;
    if (!config || source.type !== 'view' || !source.view.oneOf) return [];
    const owners = source.view.owners.map((o) => `${o}_id`);
    const set = owners.filter((o) => config[o] !== null && config[o] !== undefined);
    if (set.length === 1) return [];
    return [
      {
        attribute: set[1] ?? owners[0],
        summary: `${this.spec.typeName}: give exactly one of ${owners.join(', ')}${set.length ? ` (got ${set.join(', ')})` : ''}`,
      },
    ];
  }

  async read(config: TfObject): Promise<TfObject> {
    const source = this.spec.source;
    const remote = source.type === 'lookup' ? await this.lookup(config) : await this.view(source.view, config);
    const state = objectToTf(this.spec.attrs, remote);
    for (const name of this.spec.inputs) if (config[name] !== undefined && config[name] !== UNKNOWN) state[name] = config[name];
    return state;
  }

  private async lookup(config: TfObject): Promise<Record<string, unknown>> {
    const d = this.spec.descriptor;
    const projectId = d.scope === 'project' ? (config.project_id as string) : null;
    const wanted = config[d.identity];
    if (!given(wanted)) throw new ProviderError('invalid_value', `${this.spec.typeName}: ${d.identity} is empty`);
    const api = this.client().resourcesOf(d.kind, projectId ? { projectId } : {});
    // Compared as the service stores it (e.g. emails lowercased), so any spelling finds it.
    const lower = d.normalizers.some((n) => n.rule === 'lowercase' && n.path.length === 1 && n.path[0] === d.identity);
    const norm = (v: unknown) => (typeof v === 'string' && lower ? v.trim().toLowerCase() : v);
    let items: Record<string, unknown>[];
    try {
      items = await this.cache.all(api, projectId);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404 && projectId)
        throw new ProviderError('not_found', `${this.spec.typeName}: project ${JSON.stringify(projectId)} not found`, err.message);
      throw err;
    }
    const found = items.find((i) => norm(i[d.identity]) === norm(wanted));
    if (!found) {
      const where = projectId ? ` in project ${projectId}` : '';
      throw new ProviderError(
        'not_found',
        `${this.spec.typeName}: no ${d.title.toLowerCase()} with ${d.identity} ${JSON.stringify(wanted)}${where}`,
        `Looked through the ${items.length} ${d.title.toLowerCase()}(s)${where}. Check the ${d.identity}, or create it first (a resource "${this.spec.typeName}" in the same configuration cannot be read by a data source before it exists).`,
      );
    }
    return found;
  }

  private async view(view: ViewSpec, config: TfObject): Promise<Record<string, unknown>> {
    const client = this.client();
    const projectId = config.project_id as string;
    const owner = view.owners.find((o) => given(config[`${o}_id`]))!;
    const ownerId = config[`${owner}_id`] as string;
    const what = `${kind(owner).title.toLowerCase()} ${JSON.stringify(ownerId)} in project ${projectId}`;
    try {
      switch (view.name) {
        case 'connector_schema':
          return { ...(await client.discoveredSchema(projectId, ownerId)), id: ownerId };
        case 'dbt_lineage':
          return { ...(await client.lineage(projectId, ownerId)), id: ownerId };
        case 'latest_run': {
          const ids: Record<string, RunOwner> = {
            connector: { connectorId: ownerId },
            pipeline: { pipelineId: ownerId },
            dbt_project: { dbtProjectId: ownerId },
          };
          // The history is oldest first: the latest run is the last item of the last page.
          const runs = await client.runs(projectId, ids[owner]).listAll();
          const latest = runs.at(-1);
          if (!latest)
            throw new ProviderError(
              'not_run_yet',
              `${this.spec.typeName}: the ${what} has not run yet`,
              'Trigger a run first, or read this data source only once one exists.',
            );
          return latest;
        }
        default:
          throw new ProviderError('unknown_type', `${this.spec.typeName}: no reader for view ${view.name}`);
      }
    } catch (err) {
      if (err instanceof ApiError && err.status === 404)
        throw new ProviderError('not_found', `${this.spec.typeName}: ${err.serverMessage || 'not found'} (${what})`, err.message);
      throw err;
    }
  }
}
