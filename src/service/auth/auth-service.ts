import type { Db, Queryable } from '../store/db.js';
import { hashSecret, newId, newSecret } from '../ids.js';
import { unauthorized } from '../errors.js';
import { hashPassword, verifyPassword } from './passwords.js';
import type { Actor, RevokedCredentials } from './actor.js';
import { keyCacheOf } from './key-cache.js';
import { TokenCache, type UserActor } from './token-cache.js';
import { PERMISSION_RANK, type PermissionLevel } from '../../kinds/index.js';

export const REFRESH_TOKEN_TTL_SECONDS = 30 * 24 * 3600;
export const INVITATION_TTL_SECONDS = 7 * 24 * 3600;

export interface TokenResponse {
  access_token: string;
  refresh_token: string;
  token_type: 'Bearer';
  expires_in: number;
}

interface UserRow {
  id: string;
  data: string;
}

/**
 * What a write checks inside its transaction (AuthService.stillValid). A key: it still exists (its level
 * cannot change). A user token: its session is not revoked, and the user is still active with at least the
 * role the request was authorised with (a demotion elsewhere is not waited out for the cache's second).
 */
const STILL_VALID: Record<Actor['type'], (actor: Actor, q: Queryable) => Promise<boolean>> = {
  api_key: async (actor, q) => !!(await q.get('SELECT 1 AS ok FROM api_key_hashes WHERE api_key_id = ?', [actor.id])),
  user: async (actor, q) => {
    const row = await q.get<{ data: string }>(
      'SELECT r.data FROM sessions s JOIN resources r ON r.id = s.user_id WHERE s.id = ? AND s.revoked_at IS NULL',
      [actor.sessionId ?? ''],
    );
    const user = row && (JSON.parse(row.data) as { role: PermissionLevel; status: string });
    return !!user && user.status === 'active' && PERMISSION_RANK[user.role] >= PERMISSION_RANK[actor.level];
  },
};

/** Logins, refresh rotation, bearer checks and API keys: section 5 of the spec. */
export class AuthService {
  /** API keys' last_used_at is written at most once a minute per key, to keep reads read-only. */
  private readonly keyUseWritten = new Map<string, number>();
  /** API key lookups remembered for a second (auth/key-cache.ts; the bound is in docs/security.md). */
  private readonly keys;
  /** Access token lookups remembered for a second (auth/token-cache.ts; the bound is in docs/security.md). */
  private readonly tokens;

  constructor(
    private readonly db: Db,
    private readonly options: { accessTokenTtl: number; clock: () => number },
  ) {
    this.keys = keyCacheOf(db);
    this.tokens = new TokenCache(options.clock);
  }

  private iso(offsetSeconds = 0) {
    return new Date(this.options.clock() + offsetSeconds * 1000).toISOString();
  }

  private async issueTokens(q: Queryable, sessionId: string): Promise<TokenResponse> {
    const access = newSecret('dpat');
    const refresh = newSecret('dprt');
    // Both inserts go out at once: on PostgreSQL they are pipelined on the transaction's connection
    // (still run in order), one round trip instead of two.
    await Promise.all([
      q.run('INSERT INTO access_tokens (hash, session_id, expires_at) VALUES (?, ?, ?)', [
        hashSecret(access),
        sessionId,
        this.iso(this.options.accessTokenTtl),
      ]),
      q.run('INSERT INTO refresh_tokens (hash, session_id, expires_at, used_at) VALUES (?, ?, ?, NULL)', [
        hashSecret(refresh),
        sessionId,
        this.iso(REFRESH_TOKEN_TTL_SECONDS),
      ]),
    ]);
    return { access_token: access, refresh_token: refresh, token_type: 'Bearer', expires_in: this.options.accessTokenTtl };
  }

  /** Returns the user id on success so the caller can audit it. */
  async login(tenantId: string, email: string, password: string): Promise<{ tokens: TokenResponse; userId: string }> {
    const user = await this.db.get<UserRow & { password_hash: string | null }>(
      `SELECT r.id, r.data, c.password_hash FROM resources r LEFT JOIN user_credentials c ON c.user_id = r.id
       WHERE r.tenant_id = ? AND r.project_id = '' AND r.kind = 'user' AND r.name = ?`,
      [tenantId, email.trim().toLowerCase()],
    );
    const ok = await verifyPassword(password, user?.password_hash);
    const status = user ? (JSON.parse(user.data) as { status: string }).status : undefined;
    if (!user || !ok || status !== 'active') throw unauthorized('Invalid email or password');
    const tokens = await this.db.tx((q) => this.startSession(q, tenantId, user.id));
    return { tokens, userId: user.id };
  }

  /** A new session for a user whose identity was proven elsewhere (a password above, or single sign-on). */
  async startSession(q: Queryable, tenantId: string, userId: string): Promise<TokenResponse> {
    const sessionId = newId('session');
    // Sent together with the token inserts (pipelined, in order: the session row goes first).
    const session = q.run('INSERT INTO sessions (id, tenant_id, user_id, created_at, revoked_at) VALUES (?, ?, ?, ?, NULL)', [
      sessionId,
      tenantId,
      userId,
      this.iso(),
    ]);
    const [, tokens] = await Promise.all([session, this.issueTokens(q, sessionId)]);
    return tokens;
  }

  /**
   * Single use: the token is spent atomically. A spent token presented again revokes the
   * whole session, access tokens included (the spec's reuse rule).
   */
  async refresh(tenantId: string, refreshToken: string): Promise<TokenResponse> {
    const hash = hashSecret(refreshToken);
    const outcome = await this.db.tx(async (q) => {
      const row = await q.get<{
        session_id: string;
        expires_at: string;
        used_at: string | null;
        revoked_at: string | null;
        user_data: string | null;
      }>(
        `SELECT t.session_id, t.expires_at, t.used_at, s.revoked_at, r.data AS user_data
         FROM refresh_tokens t JOIN sessions s ON s.id = t.session_id LEFT JOIN resources r ON r.id = s.user_id
         WHERE t.hash = ? AND s.tenant_id = ?`,
        [hash, tenantId],
      );
      if (!row) return { error: 'Invalid refresh token' };
      if (row.revoked_at) return { error: 'This session was revoked; log in again' };
      if (row.used_at) {
        // Before the revocation commits: from now on this replica asks the database for the session's tokens.
        this.tokens.forgetSession(row.session_id);
        await q.run('UPDATE sessions SET revoked_at = ? WHERE id = ?', [this.iso(), row.session_id]);
        await q.run('DELETE FROM access_tokens WHERE session_id = ?', [row.session_id]);
        return { error: 'Refresh token was already used; every token of this session is now revoked. Log in again' };
      }
      if (row.expires_at <= this.iso()) return { error: 'Refresh token has expired; log in again' };
      if (!row.user_data || (JSON.parse(row.user_data) as { status: string }).status !== 'active') return { error: 'User is not active' };
      const spent = await q.run('UPDATE refresh_tokens SET used_at = ? WHERE hash = ? AND used_at IS NULL', [this.iso(), hash]);
      if (spent.changes !== 1) return { error: 'Refresh token was already used' };
      return { tokens: await this.issueTokens(q, row.session_id) };
    });
    if ('error' in outcome) throw unauthorized(outcome.error!);
    return outcome.tokens;
  }

  /** Checks a bearer credential (access token or API key) against this tenant. */
  async authenticate(tenantId: string, bearer: string): Promise<Actor> {
    const hash = hashSecret(bearer);
    return bearer.startsWith('dpk_') ? this.authenticateKey(tenantId, hash) : this.authenticateToken(tenantId, hash);
  }

  private async authenticateKey(tenantId: string, hash: string): Promise<Actor> {
    // A remembered key saves a database round trip before the request's own query; only found keys are
    // remembered, so a wrong or revoked one always asks the database. A copy per request: nothing a
    // request does to its actor reaches the next one.
    const actor = await this.keys.getOrLoad(tenantId, hash, () => this.loadKey(tenantId, hash));
    this.noteKeyUse(actor.id);
    return { ...actor };
  }

  private async loadKey(tenantId: string, hash: string) {
    const key = await this.db.get<{ api_key_id: string; project_id: string; permission_level: PermissionLevel; data: string }>(
      `SELECT h.api_key_id, h.project_id, h.permission_level, r.data FROM api_key_hashes h JOIN resources r ON r.id = h.api_key_id
       WHERE h.hash = ? AND h.tenant_id = ?`,
      [hash, tenantId],
    );
    if (!key) throw unauthorized('Invalid or revoked API key');
    return {
      type: 'api_key' as const,
      id: key.api_key_id,
      name: (JSON.parse(key.data) as { name: string }).name,
      tenantId,
      level: key.permission_level,
      projectId: key.project_id,
    };
  }

  private async authenticateToken(tenantId: string, hash: string): Promise<Actor> {
    // As for keys: only tokens that were accepted are remembered, and never past their expires_at, so a
    // wrong, revoked or expired token always asks the database (and gets its own message).
    const token = await this.tokens.getOrLoad(tenantId, hash, () => this.loadToken(tenantId, hash));
    return { ...token.actor };
  }

  private async loadToken(tenantId: string, hash: string) {
    const row = await this.db.get<{
      expires_at: string;
      session_id: string;
      revoked_at: string | null;
      user_id: string;
      data: string | null;
    }>(
      `SELECT a.expires_at, a.session_id, s.revoked_at, s.user_id, r.data FROM access_tokens a JOIN sessions s ON s.id = a.session_id
       LEFT JOIN resources r ON r.id = s.user_id WHERE a.hash = ? AND s.tenant_id = ?`,
      [hash, tenantId],
    );
    if (!row || row.revoked_at || !row.data) throw unauthorized('Invalid access token');
    if (row.expires_at <= this.iso()) throw unauthorized('The access token has expired; refresh it or log in again');
    const user = JSON.parse(row.data) as { email: string; role: PermissionLevel; status: string };
    if (user.status !== 'active') throw unauthorized('User is not active');
    const actor: UserActor = { type: 'user', id: row.user_id, name: user.email, tenantId, level: user.role, sessionId: row.session_id };
    return { actor, expiresAtMs: Date.parse(row.expires_at) };
  }

  /**
   * Used just before a mutation commits, so a credential revoked mid-request, or answered from a
   * replica's memory (key-cache.ts, token-cache.ts) after it was revoked elsewhere, cannot still write.
   */
  async stillValid(actor: Actor, q: Queryable): Promise<boolean> {
    return STILL_VALID[actor.type](actor, q);
  }

  private noteKeyUse(keyId: string) {
    const now = this.options.clock();
    if (now - (this.keyUseWritten.get(keyId) ?? 0) < 60_000) return;
    // Kept in the order written, so the entries past their minute are at the front: one per key ever
    // used, never removed, grew with the keys a tenant mints.
    this.keyUseWritten.delete(keyId);
    this.keyUseWritten.set(keyId, now);
    for (const [key, at] of this.keyUseWritten) {
      if (now - at < 60_000) break;
      this.keyUseWritten.delete(key);
    }
    const sql =
      this.db.dialect === 'sqlite'
        ? `UPDATE resources SET data = json_set(data, '$.last_used_at', ?) WHERE id = ?`
        : `UPDATE resources SET data = jsonb_set(data::jsonb, '{last_used_at}', to_jsonb(?::text))::text WHERE id = ?`;
    this.db.run(sql, [this.iso(), keyId]).catch(() => undefined);
  }

  async createApiKey(q: Queryable, k: { id: string; tenantId: string; projectId: string; level: PermissionLevel }): Promise<string> {
    const value = newSecret('dpk');
    await q.run('INSERT INTO api_key_hashes (hash, api_key_id, tenant_id, project_id, permission_level) VALUES (?, ?, ?, ?, ?)', [
      hashSecret(value),
      k.id,
      k.tenantId,
      k.projectId,
      k.level,
    ]);
    return value;
  }

  async revokeApiKey(q: Queryable, keyId: string): Promise<void> {
    // Before the delete commits: from now on this replica asks the database for the key (it is refused once committed).
    this.keys.forgetKey(keyId);
    await q.run('DELETE FROM api_key_hashes WHERE api_key_id = ?', [keyId]);
  }

  /**
   * Whether the user can sign in: a password is set, or the user has signed in with single sign-on
   * (an invited user has neither, whatever its disabled flag says).
   */
  async hasSignInMethod(q: Queryable, userId: string): Promise<boolean> {
    if (await q.get('SELECT 1 AS ok FROM user_credentials WHERE user_id = ? AND password_hash IS NOT NULL', [userId])) return true;
    return !!(await q.get('SELECT 1 AS ok FROM sso_identities WHERE user_id = ?', [userId]));
  }

  async setPassword(q: Queryable, tenantId: string, userId: string, password: string): Promise<void> {
    const hash = await hashPassword(password);
    const updated = await q.run(
      'UPDATE user_credentials SET password_hash = ?, invitation_hash = NULL, invitation_expires_at = NULL WHERE user_id = ?',
      [hash, userId],
    );
    if (updated.changes === 0)
      await q.run('INSERT INTO user_credentials (user_id, tenant_id, password_hash) VALUES (?, ?, ?)', [userId, tenantId, hash]);
  }

  async createInvitation(q: Queryable, tenantId: string, userId: string): Promise<string> {
    const token = newSecret('dpinv');
    await q.run('DELETE FROM user_credentials WHERE user_id = ?', [userId]);
    await q.run(
      'INSERT INTO user_credentials (user_id, tenant_id, password_hash, invitation_hash, invitation_expires_at) VALUES (?, ?, NULL, ?, ?)',
      [userId, tenantId, hashSecret(token), this.iso(INVITATION_TTL_SECONDS)],
    );
    return token;
  }

  /** Returns the invited user's id, or null when the token is unknown, spent or expired. */
  async redeemInvitation(q: Queryable, tenantId: string, token: string): Promise<string | null> {
    const row = await q.get<{ user_id: string; invitation_expires_at: string }>(
      'SELECT user_id, invitation_expires_at FROM user_credentials WHERE invitation_hash = ? AND tenant_id = ?',
      [hashSecret(token), tenantId],
    );
    if (!row || row.invitation_expires_at <= this.iso()) return null;
    // Spent atomically, so of two concurrent accepts only one can set the password.
    const spent = await q.run(
      'UPDATE user_credentials SET invitation_hash = NULL, invitation_expires_at = NULL WHERE user_id = ? AND invitation_hash = ?',
      [row.user_id, hashSecret(token)],
    );
    return spent.changes === 1 ? row.user_id : null;
  }

  /**
   * The user's role, email or status is being changed (in a transaction about to commit): this replica stops
   * answering for the user's access tokens from memory at once, so the next request sees the new user.
   */
  userChanged(userId: string): void {
    this.tokens.forgetUser(userId);
  }

  /**
   * Another replica revoked or changed these credentials (a stream bus `revoked` event): this replica
   * stops answering for them from memory at once, instead of after its caches' TTL.
   */
  forgetCredentials(tenantId: string, revoked: RevokedCredentials): void {
    if (revoked.actorId) {
      this.keys.forgetKey(revoked.actorId);
      this.tokens.forgetUser(revoked.actorId);
    }
    if (revoked.projectId) this.keys.forgetProject(tenantId, revoked.projectId);
  }

  async revokeUserSessions(q: Queryable, userId: string): Promise<void> {
    // Before the revocation commits: from now on this replica asks the database for the user's tokens.
    this.tokens.forgetUser(userId);
    await q.run('UPDATE sessions SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL', [this.iso(), userId]);
    await q.run('DELETE FROM access_tokens WHERE session_id IN (SELECT id FROM sessions WHERE user_id = ?)', [userId]);
  }

  async forgetUser(q: Queryable, userId: string): Promise<void> {
    await this.revokeUserSessions(q, userId);
    await q.run('DELETE FROM user_credentials WHERE user_id = ?', [userId]);
    await q.run('DELETE FROM sso_identities WHERE user_id = ?', [userId]);
  }
}
