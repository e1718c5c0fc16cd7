import type { PermissionLevel } from '../../kinds/index.js';

/** Who is making a request. API keys are bound to one project; user tokens reach the whole tenant. */
export interface Actor {
  type: 'user' | 'api_key';
  id: string;
  name: string;
  tenantId: string;
  level: PermissionLevel;
  /** For API keys: the only project they can reach. */
  projectId?: string;
  /** For user tokens: the login session (revoked as a whole on refresh-token reuse). */
  sessionId?: string;
}

/** Whose credentials a committed write revoked or changed: an actor (API key or user), or every key of a deleted project. */
export interface RevokedCredentials {
  actorId?: string;
  projectId?: string;
}
