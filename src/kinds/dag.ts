/** A node of a named dependency graph: pipeline steps, dbt models. */
export interface DagNode {
  name: string;
  dependsOn: string[];
}

export type DagProblem =
  | { type: 'duplicate'; index: number; name: string }
  | { type: 'missing'; index: number; name: string; dependency: string }
  | { type: 'cycle'; index: number; name: string; cycle: string[] };

/**
 * Depth-first walk over the graph with an explicit stack (a 10,000-long chain would overflow the
 * call stack if recursive), visiting each node and edge once: O(nodes + edges). `onCycle` gets the
 * path when a dependency leads back to a node still being visited; returning true stops the walk.
 * Nodes are finished (`onDone`) dependencies first, roots in declaration order.
 */
function walkDag(
  nodes: DagNode[],
  byIndex: Map<string, number>,
  onDone: (index: number) => void,
  onCycle?: (root: number, path: number[]) => boolean,
): void {
  const state = new Uint8Array(nodes.length); // 0 new, 1 visiting, 2 done
  const path: number[] = [];
  const next: number[] = []; // next[k]: which dependency of path[k] to look at
  for (let root = 0; root < nodes.length; root++) {
    if (state[root]) continue;
    state[root] = 1;
    path.push(root);
    next.push(0);
    while (path.length) {
      const top = path.length - 1;
      const node = path[top];
      const deps = nodes[node].dependsOn;
      if (next[top] < deps.length) {
        const dep = byIndex.get(deps[next[top]++]);
        if (dep === undefined || state[dep] === 2) continue;
        if (state[dep] === 1) {
          if (onCycle?.(root, [...path.slice(path.lastIndexOf(dep)), dep])) return;
          continue;
        }
        state[dep] = 1;
        path.push(dep);
        next.push(0);
        continue;
      }
      state[node] = 2;
      path.pop();
      next.pop();
      onDone(node);
    }
  }
}

/** Finds the first problem of a graph, in declaration order, so the message names one node. Linear in nodes + edges. */
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
  let problem: DagProblem | null = null;
  walkDag(
    nodes,
    byName,
    () => undefined,
    (root, path) => {
      problem = { type: 'cycle', index: root, name: nodes[root].name, cycle: path.map((i) => nodes[i].name) };
      return true;
    },
  );
  return problem;
}

/** The field and message a DAG problem is reported at: `steps[2].depends_on`, naming the node. */
export function describeDagProblem(problem: DagProblem, list: string, noun: string): { field: string; message: string } {
  const at = `${list}[${problem.index}]`;
  if (problem.type === 'duplicate') return { field: `${at}.name`, message: `${noun} name "${problem.name}" is used twice` };
  if (problem.type === 'missing')
    return {
      field: `${at}.depends_on`,
      message: `${noun} "${problem.name}" depends on "${problem.dependency}", which is not a ${noun} here`,
    };
  return { field: `${at}.depends_on`, message: `${noun} "${problem.name}" is part of a dependency cycle: ${problem.cycle.join(' -> ')}` };
}

/** Problems of every DAG-shaped field (`x-dag`) of a resource body. */
export function dagProblems(dags: { field: string; noun: string }[], body: Record<string, unknown>): { field: string; message: string }[] {
  const out: { field: string; message: string }[] = [];
  for (const dag of dags) {
    const items = body[dag.field];
    if (!Array.isArray(items)) continue;
    const problem = checkDag(items.map((i: { name: string; depends_on?: string[] }) => ({ name: i.name, dependsOn: i.depends_on ?? [] })));
    if (problem) out.push(describeDagProblem(problem, dag.field, dag.noun));
  }
  return out;
}

/**
 * Dependencies first; ties keep declaration order. Assumes checkDag found nothing (a missing
 * dependency is ignored). Linear in nodes + edges, with no recursion.
 */
export function topologicalOrder(nodes: DagNode[]): string[] {
  return topologicalIndexes(nodes).map((i) => nodes[i].name);
}

/** topologicalOrder as indexes into `nodes`. */
export function topologicalIndexes(nodes: DagNode[]): number[] {
  const byName = new Map<string, number>();
  nodes.forEach((n, i) => {
    if (!byName.has(n.name)) byName.set(n.name, i);
  });
  const order: number[] = [];
  walkDag(nodes, byName, (i) => order.push(i));
  return order;
}
