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

/** The field and message a DAG problem is reported at: `steps[2].depends_on`, naming the node. */
export function describeDagProblem(problem: DagProblem, list: string, noun: string): { field: string; message: string } {
  const at = `${list}[${problem.index}]`;
  if (problem.type === 'duplicate') return { field: `${at}.name`, message: `${noun} name "${problem.name}" is used twice` };
  if (problem.type === 'missing') return { field: `${at}.depends_on`, message: `${noun} "${problem.name}" depends on "${problem.dependency}", which is not a ${noun} here` };
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
