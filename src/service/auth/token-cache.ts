import type { Actor } from './actor.js';
import { CACHE_TTL_MS, TtlCache } from './ttl-cache.js';

/**
 * How long a replica answers for an access token it has looked up without asking the database again.
 * The bound of docs/security.md ("Access token lookups"): a session revoked through another replica (a
 * logout of every session by a password reset, a disabled or deleted user, a reused refresh token), or a
 * user whose role changed there, can still READ on this one for at most this long. Writes are not
 * affected: they check the session and the user again inside their transaction (AuthService.stillValid).
 */
export const TOKEN_CACHE_TTL_MS = CACHE_TTL_MS;

export type UserActor = Actor & { type: 'user'; sessionId: string };

export interface CachedToken {
  actor: UserActor;
  /** The token's expires_at, in ms of the service's clock: never answered from memory past it. */
  expiresAtMs: number;
}

const sessionMark = (sessionId: string) => `session\0${sessionId}`;
const userMark = (userId: string) => `user\0${userId}`;

/**
 * A replica's short-lived memory of access token lookups (each request otherwise costs a database round
 * trip, a join of the token, its session and its user, before its own query): a TtlCache keyed by tenant
 * and token hash, at most 10,000 tokens, each for at most 1 s of real time and never past its expires_at
 * on the service clock. Revocations on this replica take effect at once: forgetSession() and forgetUser()
 * drop the tokens and keep them out.
 */
export class TokenCache extends TtlCache<CachedToken> {
  constructor(clock: () => number) {
    super({
      ttlMs: TOKEN_CACHE_TTL_MS,
      marks: (token) => [sessionMark(token.actor.sessionId), userMark(token.actor.id)],
      live: (token) => token.expiresAtMs > clock(),
    });
  }

  /** The session was revoked (or is being revoked) on this replica: every access token of it. */
  forgetSession(sessionId: string): void {
    this.forget(sessionMark(sessionId));
  }

  /** The user's sessions were revoked, or what the user may do changed (role, status), on this replica. */
  forgetUser(userId: string): void {
    this.forget(userMark(userId));
  }
}
