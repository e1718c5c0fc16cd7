import { randomBytes } from 'node:crypto';
import type { Db } from '../store/db.js';
import { hashSecret } from '../ids.js';

/** A browser sign-in between the redirect to the identity provider and its callback. */
export interface SsoFlow {
  tenantId: string;
  providerId: string;
  /** OIDC: the nonce the ID token must carry and the PKCE verifier the code is bound to. */
  nonce: string | null;
  codeVerifier: string | null;
  /** SAML: the AuthnRequest ID the response must answer (InResponseTo). */
  requestId: string | null;
  /** The callback URL sent to the identity provider; the code exchange must repeat it exactly. */
  redirectUri: string;
}

/** Ten minutes: long enough to type a password and pass a second factor at the IdP. */
export const FLOW_TTL_SECONDS = 600;

/**
 * Flow state lives in the database, not in memory, so a callback reaching another replica
 * (or a restarted service) still finds it. The state value itself is only stored hashed:
 * it is what the browser carries, and whoever holds it may finish the flow.
 */
export class SsoFlows {
  constructor(
    private readonly db: Db,
    private readonly clock: () => number,
  ) {}

  private iso(offsetSeconds = 0) {
    return new Date(this.clock() + offsetSeconds * 1000).toISOString();
  }

  /** Stores a new flow and returns its state value (the OIDC `state`, the SAML `RelayState`). */
  async start(flow: SsoFlow): Promise<string> {
    const state = randomBytes(32).toString('base64url');
    await this.db.run('DELETE FROM sso_flows WHERE expires_at <= ?', [this.iso()]);
    await this.db.run(
      'INSERT INTO sso_flows (state_hash, tenant_id, provider_id, nonce, code_verifier, request_id, redirect_uri, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
      [
        hashSecret(state),
        flow.tenantId,
        flow.providerId,
        flow.nonce,
        flow.codeVerifier,
        flow.requestId,
        flow.redirectUri,
        this.iso(),
        this.iso(FLOW_TTL_SECONDS),
      ],
    );
    return state;
  }

  /**
   * Takes the flow for a state, once: the row is deleted by whoever reads it first, so a replayed
   * callback (or two racing ones) finds nothing. Unknown, spent, expired or another tenant's: undefined.
   */
  async claim(tenantId: string, state: string): Promise<SsoFlow | undefined> {
    return this.db.tx(async (q) => {
      const hash = hashSecret(state);
      const row = await q.get<{
        tenant_id: string;
        provider_id: string;
        nonce: string | null;
        code_verifier: string | null;
        request_id: string | null;
        redirect_uri: string;
        expires_at: string;
      }>('SELECT tenant_id, provider_id, nonce, code_verifier, request_id, redirect_uri, expires_at FROM sso_flows WHERE state_hash = ?', [
        hash,
      ]);
      if (!row || row.tenant_id !== tenantId) return undefined;
      const spent = await q.run('DELETE FROM sso_flows WHERE state_hash = ?', [hash]);
      if (spent.changes !== 1 || row.expires_at <= this.iso()) return undefined;
      return {
        tenantId: row.tenant_id,
        providerId: row.provider_id,
        nonce: row.nonce,
        codeVerifier: row.code_verifier,
        requestId: row.request_id,
        redirectUri: row.redirect_uri,
      };
    });
  }
}
