import { describe, expect, test } from 'vitest';
import { lineageGraph, modelsInBuildOrder, transitionAlert, type DeclaredModel } from '../../../src/service/routes/views.js';
import type { ApiError } from '../../../src/service/errors.js';

const model = (name: string, depends_on: string[] = [], sources: DeclaredModel['sources'] = []): DeclaredModel => ({
  name,
  materialization: 'table',
  depends_on,
  sources,
});

describe('dbt project views', () => {
  test('models in build order, numbered from 1 in that order', () => {
    const declared = [model('revenue', ['orders', 'customers']), model('orders', ['stg_orders']), model('stg_orders'), model('customers')];
    const rows = modelsInBuildOrder(declared);
    const position = new Map(rows.map((r) => [r.model.name, r.seq]));
    expect(rows.map((r) => r.seq)).toEqual([1, 2, 3, 4]);
    expect(position.get('stg_orders')!).toBeLessThan(position.get('orders')!);
    expect(position.get('orders')!).toBeLessThan(position.get('revenue')!);
    expect(position.get('customers')!).toBeLessThan(position.get('revenue')!);
    expect(rows.find((r) => r.model.name === 'revenue')!.model).toBe(declared[0]);
    expect(modelsInBuildOrder([])).toEqual([]);
  });

  test('lineage: a node per model and per source table (once), an edge per dependency and source', () => {
    const orders = { connector_id: 'con_1', table: 'orders' };
    const graph = lineageGraph([model('stg_orders', [], [orders]), model('revenue', ['stg_orders'], [orders])]);
    expect(graph).toEqual({
      nodes: [
        { id: 'model.stg_orders', type: 'model', name: 'stg_orders', connector_id: null },
        { id: 'source.con_1.orders', type: 'source', name: 'orders', connector_id: 'con_1' },
        { id: 'model.revenue', type: 'model', name: 'revenue', connector_id: null },
      ],
      edges: [
        { from: 'source.con_1.orders', to: 'model.stg_orders' },
        { from: 'model.stg_orders', to: 'model.revenue' },
        { from: 'source.con_1.orders', to: 'model.revenue' },
      ],
    });
  });

  test('models without depends_on or sources (older declarations) have no edges', () => {
    const bare = { name: 'm', materialization: 'view' } as DeclaredModel;
    expect(lineageGraph([bare])).toEqual({ nodes: [{ id: 'model.m', type: 'model', name: 'm', connector_id: null }], edges: [] });
    expect(modelsInBuildOrder([bare]).map((r) => r.model.name)).toEqual(['m']);
  });
});

describe('alert transitions', () => {
  const acknowledge = { verb: 'acknowledge' as const, from: ['firing'], to: 'acknowledged' as const };
  const resolve = { verb: 'resolve' as const, from: ['firing', 'acknowledged'], to: 'resolved' as const };

  test('moves the status and stamps when and by whom; answers the status before', () => {
    const data: Record<string, unknown> = { id: 'alr_1', status: 'firing' };
    expect(transitionAlert(data, acknowledge, '2026-01-01T00:00:00.000Z', 'a@x')).toBe('firing');
    expect(data).toEqual({ id: 'alr_1', status: 'acknowledged', acknowledged_at: '2026-01-01T00:00:00.000Z', acknowledged_by: 'a@x' });
    expect(transitionAlert(data, resolve, '2026-01-01T00:01:00.000Z', 'b@x')).toBe('acknowledged');
    expect(data).toMatchObject({ status: 'resolved', resolved_at: '2026-01-01T00:01:00.000Z', resolved_by: 'b@x' });
  });

  test('refuses a transition from another status with a 409, leaving the alert as it was', () => {
    const data: Record<string, unknown> = { status: 'resolved' };
    let error: ApiError | undefined;
    try {
      transitionAlert(data, acknowledge, 't', 'a@x');
    } catch (err) {
      error = err as ApiError;
    }
    expect([error?.code, error?.message]).toEqual(['conflict', 'Alert is resolved; only firing alerts can be acknowledged']);
    expect(() => transitionAlert({ status: 'resolved' }, resolve, 't', 'a@x')).toThrow(
      'Alert is resolved; only firing or acknowledged alerts can be resolved',
    );
    expect(data).toEqual({ status: 'resolved' });
  });
});
