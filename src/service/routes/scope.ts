import type { FastifyRequest } from 'fastify';
import type { ServiceContext } from '../context.js';
import { invalid, notFound } from '../errors.js';
import type { Actor } from '../auth/actor.js';

/**
 * The project a project-scoped request is about: the `:id` path parameter or, on the
 * unprefixed extension paths, the API key's own project. A project outside the
 * caller's reach is "not found", never "forbidden", so its existence is not revealed.
 */
export async function resolveProject(ctx: ServiceContext, req: FastifyRequest): Promise<string> {
  const projectId = projectInReach(req);
  await assertProjectExists(ctx, req, projectId);
  return projectId;
}

/**
 * The project of the request as far as the caller's reach says, without asking the store whether
 * it exists: for a read that can tell from its own result (a list with rows in the project proves
 * it exists; only an empty one needs assertProjectExists), saving a round trip.
 */
export function projectInReach(req: FastifyRequest): string {
  const actor = req.actor as Actor;
  const fromPath = (req.params as { id?: string }).id;
  let projectId = fromPath;
  if (projectId === undefined) {
    if (actor.type !== 'api_key')
      throw invalid('project', 'is needed: use /projects/{id}/... with a user token (unprefixed paths take the project of an API key)');
    projectId = actor.projectId!;
  }
  if (actor.projectId && actor.projectId !== projectId) throw notFound('Project');
  return projectId;
}

export async function assertProjectExists(ctx: ServiceContext, req: FastifyRequest, projectId: string): Promise<void> {
  if (!(await ctx.resources.exists(req.tenant!.id, '', 'project', projectId))) throw notFound('Project');
}
