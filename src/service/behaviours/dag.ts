/** A node of a named dependency graph: pipeline steps, dbt models. */
export interface DagNode {
  name: string;
  dependsOn: string[];
}

export type DagProblem =
  | { type: 'duplicate'; index: number; name: string }
  | { type: 'missing'; index: number; name: string; dependency: string }
  | { type: 'cycle'; index: number; name: string; cycle: string[] };

/** Finds the first problem of a graph, in declaration order, so the message names one node. */
export function checkDag(nodes: DagNode[]): DagProblem | null {
  const byName = new Map<string, number>();
  for (const [index, node] of nodes.entries()) {
    if (byName.has(node.name)) return { type: 'duplicate', index, name: node.name };
    byName.set(node.name, index);
  }
  for (const [index, node] of nodes.entries()) {
    for (const dependency of node.dependsOn) {
      if (!byName.has(dependency)) return { type: 'missing', index, name: node.name, dependency };
    }
  }
  const state = new Map<string, 'visiting' | 'done'>();
  const stack: string[] = [];
  const visit = (name: string): string[] | null => {
    if (state.get(name) === 'done') return null;
    if (state.get(name) === 'visiting') return [...stack.slice(stack.indexOf(name)), name];
    state.set(name, 'visiting');
    stack.push(name);
    for (const dep of nodes[byName.get(name)!].dependsOn) {
      const cycle = visit(dep);
      if (cycle) return cycle;
    }
    stack.pop();
    state.set(name, 'done');
    return null;
  };
  for (const [index, node] of nodes.entries()) {
    const cycle = visit(node.name);
    if (cycle) return { type: 'cycle', index, name: node.name, cycle };
  }
  return null;
}

/** Dependencies first; ties keep declaration order. Assumes checkDag found nothing. */
export function topologicalOrder(nodes: DagNode[]): string[] {
  const done = new Set<string>();
  const order: string[] = [];
  const byName = new Map(nodes.map((n) => [n.name, n]));
  const visit = (name: string) => {
    if (done.has(name)) return;
    done.add(name);
    for (const dep of byName.get(name)?.dependsOn ?? []) visit(dep);
    order.push(name);
  };
  for (const node of nodes) visit(node.name);
  return order;
}
