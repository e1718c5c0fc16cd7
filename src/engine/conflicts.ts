import type { ConfigDocument } from '../config/index.js';
import type { Problem } from './problems.js';

/** An ownership conflict met while planning a document: the problem, the document, the other source. */
export interface OwnershipConflict {
  problem: Problem;
  doc: ConfigDocument;
  owner: string;
}

/**
 * A project managed by another source usually comes with everything declared in it: planning
 * another repository's config (or a copy, or one file of it with the default source id) met 1
 * project and 350 resources, and listed 351 conflicts of equal weight. The project's conflict is
 * the root cause; the conflicts of the resources in it with the same owner follow from it, right
 * after it (`follows`, and the project's `followers` counts them), as config errors do
 * (sortErrors). Every problem is kept; only the order and those two marks change.
 */
export function nestUnderProjectConflicts(errors: Problem[], conflicts: OwnershipConflict[]): Problem[] {
  const projects = new Map<string, OwnershipConflict>();
  for (const c of conflicts) if (c.doc.descriptor.scopeContainer) projects.set(c.doc.name, c);
  const followersOf = new Map<Problem, Problem[]>();
  for (const c of conflicts) {
    const project = c.doc.project === undefined ? undefined : projects.get(c.doc.project);
    if (!project || project.owner !== c.owner) continue;
    const list = followersOf.get(project.problem) ?? [];
    list.push(c.problem);
    followersOf.set(project.problem, list);
  }
  if (!followersOf.size) return errors;
  const following = new Set([...followersOf.values()].flat());
  const out: Problem[] = [];
  for (const e of errors) {
    if (following.has(e)) continue;
    const followers = followersOf.get(e);
    if (!followers) {
      out.push(e);
      continue;
    }
    out.push({ ...e, followers: followers.length });
    for (const f of followers) out.push({ ...f, follows: true });
  }
  return out;
}
