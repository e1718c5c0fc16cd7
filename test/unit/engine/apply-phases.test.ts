import { NetworkError } from '../../../src/client/index.js';
import { describe, expect, it } from 'vitest';
import { appliedState, config, emptyState, PLAN_OPTIONS, SHOP } from './fixtures.js';
import {
  applyGraph,
  makePlan,
  outcomesOf,
  schedule,
  type ApplyGraph,
  type ApplyNode,
  type PlannedChange,
} from '../../../src/engine/index.js';

/** The apply's phases (engine/apply.ts): its graph, its scheduler with a fake executor, its outcomes. */

const shop = config(SHOP);
const descriptors = new Map(shop.documents.map((d) => [d.descriptor.kind, d.descriptor]));
const deps = (graph: ApplyGraph) =>
  Object.fromEntries([...graph.nodes.values()].map((n) => [`${n.step} ${n.change.name}`, [...n.deps].map((id) => name(graph, id)).sort()]));
const name = (graph: ApplyGraph, id: string) => {
  const n = graph.nodes.get(id)!;
  return `${n.step} ${n.change.name}`;
};

describe('applyGraph', () => {
  it('writes wait for their project and what they reference', () => {
    const plan = makePlan(shop.documents, emptyState(), shop.secrets, PLAN_OPTIONS);
    const graph = applyGraph(plan, descriptors, emptyState());
    expect(deps(graph)).toEqual({ 'write shop': [], 'write a': ['write shop'], 'write escalate': ['write a', 'write shop'] });
    expect(graph.unsupported).toEqual([]);
  });

  it('leaves out no-ops and observe-only changes; sets unsupported ones aside', () => {
    const state = appliedState(shop);
    state.resources.get([...state.resources.keys()].find((k) => k.includes('escalate'))!)!.object.steps = [];
    const plan = makePlan(shop.documents, state, shop.secrets, { ...PLAN_OPTIONS, specOperations: true });
    const graph = applyGraph(plan, descriptors, state);
    expect(graph.nodes.size).toBe(0);
    expect(graph.unsupported).toEqual([
      { change: plan.changes[2], status: 'unsupported', message: 'the service has no update for escalation_policy' },
    ]);
  });

  it('a replace deletes before it re-creates, after what references it is deleted or updated away', () => {
    const state = appliedState(shop);
    const key = (name: string) => [...state.resources.keys()].find((k) => k.endsWith(`\u0000${name}`))!;
    state.resources.get(key('a'))!.object.type = 'webhook';
    const plan = makePlan(shop.documents, state, shop.secrets, PLAN_OPTIONS);
    const graph = applyGraph(plan, descriptors, state);
    expect(deps(graph)).toEqual({
      'delete a': ['delete escalate'],
      'write a': ['delete a'],
      'delete escalate': [],
      'write escalate': ['delete escalate', 'write a'],
    });
  });

  it('a pruned project goes after the deletes inside it', () => {
    const state = appliedState(shop);
    const plan = makePlan([], state, shop.secrets, { ...PLAN_OPTIONS, prune: true });
    const graph = applyGraph(plan, descriptors, state);
    expect(deps(graph)).toEqual({ 'delete shop': [] });
    const changes = [
      ...plan.changes,
      { action: 'delete', kind: 'notification_channel', name: 'x', project: 'shop', key: 'k-x', id: 'nc-x' } as PlannedChange,
    ];
    expect(deps(applyGraph({ ...plan, changes }, descriptors, state))).toEqual({ 'delete shop': ['delete x'], 'delete x': [] });
  });
});

/** A graph by hand: `edges` maps a node to the nodes it waits for. */
function graphOf(edges: Record<string, string[]>): ApplyGraph {
  const nodes = new Map<string, ApplyNode>();
  for (const id of Object.keys(edges)) {
    const change = { action: 'create', yamlKind: 'Project', name: id, key: id } as PlannedChange;
    nodes.set(id, { id, change, step: 'write', deps: new Set(), dependents: new Set(), state: 'pending' });
  }
  for (const [id, on] of Object.entries(edges))
    for (const d of on) {
      nodes.get(id)!.deps.add(d);
      nodes.get(d)!.dependents.add(id);
    }
  return { nodes, unsupported: [] };
}

const states = (graph: ApplyGraph) => Object.fromEntries([...graph.nodes].map(([id, n]) => [id, [n.state, n.message]]));

describe('schedule', () => {
  it('runs each node after its dependencies, at most `concurrency` at a time', async () => {
    const graph = graphOf({ a: [], b: [], c: ['a', 'b'], d: [] });
    const started: string[] = [];
    let running = 0;
    let most = 0;
    await schedule(
      graph.nodes,
      async (node) => {
        started.push(node.id);
        most = Math.max(most, ++running);
        await new Promise((r) => setTimeout(r, 5));
        running--;
      },
      { concurrency: 2, progress: () => {} },
    );
    expect(most).toBe(2);
    expect(started.indexOf('c')).toBeGreaterThan(Math.max(started.indexOf('a'), started.indexOf('b')));
    expect(Object.values(states(graph))).toEqual([
      ['done', undefined],
      ['done', undefined],
      ['done', undefined],
      ['done', undefined],
    ]);
  });

  it('among the nodes ready, starts them in the order of the graph (not the order they became ready)', async () => {
    const graph = graphOf({ a: [], b: ['a'], c: [], d: [] });
    const started: string[] = [];
    await schedule(graph.nodes, async (node) => void started.push(node.id), { concurrency: 1, progress: () => {} });
    expect(started).toEqual(['a', 'b', 'c', 'd']);
  });

  it('a failure skips what depends on it, transitively (naming the failed change); the rest goes on', async () => {
    const graph = graphOf({ a: [], b: ['a'], c: ['b'], d: [] });
    const lines: string[] = [];
    await schedule(
      graph.nodes,
      async (node) => {
        if (node.id === 'a') throw new Error('409 conflict');
      },
      { concurrency: 4, progress: (l) => lines.push(l) },
    );
    expect(states(graph)).toEqual({
      a: ['failed', '409 conflict'],
      b: ['skipped', 'skipped: Project a was not applied'],
      c: ['skipped', 'skipped: Project a was not applied'],
      d: ['done', undefined],
    });
    expect(lines).toEqual(expect.arrayContaining(['x Project a: failed: 409 conflict', '  Project b: skipped: Project a was not applied']));
  });

  it('an unsupported node is reported and skips its dependents', async () => {
    const graph = graphOf({ a: [], b: ['a'] });
    const lines: string[] = [];
    await schedule(
      graph.nodes,
      async (node) => {
        node.state = 'unsupported';
        node.message = 'not served';
      },
      { concurrency: 1, progress: (l) => lines.push(l) },
    );
    expect(states(graph)).toEqual({ a: ['unsupported', 'not served'], b: ['skipped', 'skipped: Project a was not applied'] });
    expect(lines[0]).toBe('! Project a: not served');
  });

  it('stops starting nodes once aborted; a dependency cycle fails instead of hanging', async () => {
    const abort = new AbortController();
    const graph = graphOf({ a: [], b: ['a'] });
    await schedule(graph.nodes, async () => abort.abort(), { concurrency: 1, signal: abort.signal, progress: () => {} });
    expect(states(graph)).toEqual({ a: ['done', undefined], b: ['skipped', 'not started: the apply was stopped'] });
    const cycle = graphOf({ a: ['b'], b: ['a'], c: [] });
    await schedule(cycle.nodes, async () => {}, { concurrency: 1, progress: () => {} });
    expect(states(cycle)).toEqual({ a: ['failed', 'dependency cycle'], b: ['failed', 'dependency cycle'], c: ['done', undefined] });
  });

  it('stops starting nodes once a change finds the service unreachable: the rest is skipped, not failed one by one', async () => {
    const graph = graphOf({ a: [], b: [], c: [], d: ['c'] });
    const lines: string[] = [];
    const refused = new NetworkError({
      method: 'POST',
      route: '/x',
      url: 'https://acme.localhost/x',
      code: 'ECONNREFUSED',
      reason: 'connect ECONNREFUSED',
    });
    const ran: string[] = [];
    await schedule(
      graph.nodes,
      async (node) => {
        ran.push(node.id);
        if (node.id === 'b') throw refused;
      },
      { concurrency: 1, progress: (l) => lines.push(l) },
    );
    expect(ran).toEqual(['a', 'b']);
    const notStarted = 'not started: the service was unreachable (ECONNREFUSED); run apply again once it is back';
    expect(states(graph)).toEqual({
      a: ['done', undefined],
      b: ['failed', refused.message],
      c: ['skipped', notStarted],
      d: ['skipped', notStarted],
    });
    expect(lines).toContain('! the service is unreachable: no further change is started (ECONNREFUSED)');
    // Other failures (an API error, a reset mid-request) do not stop the rest.
    const other = graphOf({ a: [], b: [] });
    const reset = new NetworkError({ method: 'POST', route: '/x', url: 'https://acme.localhost/x', code: 'ECONNRESET', reason: 'reset' });
    await schedule(
      other.nodes,
      async (node) => {
        if (node.id === 'a') throw reset;
      },
      { concurrency: 1, progress: () => {} },
    );
    expect(states(other)).toEqual({ a: ['failed', reset.message], b: ['done', undefined] });
  });
});

describe('outcomesOf', () => {
  it('one outcome per change, unsupported first; a replace is done only when both halves are; the new id of a write', () => {
    const plan = makePlan(shop.documents, emptyState(), shop.secrets, PLAN_OPTIONS);
    const graph = applyGraph(plan, descriptors, emptyState());
    const [project, channel, policy] = [...graph.nodes.values()];
    project.state = 'done';
    project.message = 'prj_1';
    channel.state = 'failed';
    channel.message = '500';
    policy.state = 'skipped';
    policy.message = 'skipped: x';
    const unsupported = { change: { name: 'u' } as PlannedChange, status: 'unsupported' as const, message: 'no create' };
    const result = outcomesOf({ ...graph, unsupported: [unsupported] });
    expect(result.outcomes.map((o) => [o.change.name, o.status, o.message, o.id])).toEqual([
      ['u', 'unsupported', 'no create', undefined],
      ['shop', 'done', undefined, 'prj_1'],
      ['a', 'failed', '500', undefined],
      ['escalate', 'skipped', 'skipped: x', undefined],
    ]);
    expect(result.converged).toBe(false);

    const replace = graphOf({ del: [], write: [] });
    const change = { name: 'r' } as PlannedChange;
    const [del, write] = [...replace.nodes.values()];
    Object.assign(del, { change, step: 'delete', state: 'failed', message: 'refused' });
    Object.assign(write, { change, step: 'write', state: 'done', message: 'new-id' });
    expect(outcomesOf(replace)).toEqual({ outcomes: [{ change, status: 'failed', message: 'refused', id: undefined }], converged: false });
    del.state = 'done';
    expect(outcomesOf(replace)).toEqual({ outcomes: [{ change, status: 'done', message: undefined, id: 'new-id' }], converged: true });
  });
});
