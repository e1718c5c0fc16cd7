import { createServer, type Server } from 'node:https';
import { generateKeyPairSync, createSign, type KeyObject } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import Provider from 'oidc-provider';
import { loadOrCreateTls } from '../../src/service/tls.js';

export interface IdpClient {
  client_id: string;
  client_secret?: string;
  redirect_uris: string[];
}

/** Changes an ID token on its way from the IdP's token endpoint to the service (a tampering network, or a misbehaving IdP). */
export type IdTokenTamper = (
  idToken: string,
  resign: (claims: (c: Record<string, unknown>) => Record<string, unknown>) => string,
) => string;

/**
 * A real OpenID Connect provider (panva's oidc-provider) over HTTPS on loopback, with a certificate
 * from its own CA (not the service's), as a private IdP would have. Logins use its development
 * interactions: any login name is an account, and the account's email is that name.
 */
export class TestOidcIdp {
  /** When set, the next token responses carry an ID token rewritten by it. */
  tamper: IdTokenTamper | null = null;
  /** The path of every request the IdP received, in order. */
  readonly requests: string[] = [];
  private handler: ((req: IncomingMessage, res: ServerResponse) => void) | null = null;

  private constructor(
    private readonly server: Server,
    readonly issuer: string,
    /** PEM of the CA that issued the IdP's certificate: what an sso_provider's ca_certificate holds. */
    readonly caPem: string,
    private readonly signingKey: KeyObject,
    private readonly dir: string,
  ) {
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      this.requests.push(req.url ?? '');
      if (!this.handler) return void res.writeHead(503).end('IdP not configured yet');
      if (this.tamper && req.url?.startsWith('/token')) this.interceptTokenResponse(res);
      this.handler(req, res);
    });
  }

  /** Listens first: clients' redirect URIs need the service's provider ids, which need the issuer URL. */
  static async start(): Promise<TestOidcIdp> {
    const dir = mkdtempSync(join(tmpdir(), 'dp-idp-'));
    const tls = await loadOrCreateTls({ dataDir: dir });
    const server = createServer({ cert: tls.cert, key: tls.key });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    return new TestOidcIdp(server, `https://localhost:${port}`, readFileSync(tls.certPath, 'utf8'), privateKey, dir);
  }

  /** Registers the clients and starts answering. */
  configure(clients: IdpClient[]) {
    const jwk = { ...this.signingKey.export({ format: 'jwk' }), kid: 'test-key', use: 'sig', alg: 'RS256' };
    const provider = new Provider(this.issuer, {
      clients: clients.map((c) => ({
        ...c,
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: c.client_secret ? 'client_secret_basic' : 'none',
      })),
      jwks: { keys: [jwk] },
      cookies: { keys: ['test-idp-cookie-key'] },
      claims: { openid: ['sub'], email: ['email', 'email_verified'] },
      pkce: { required: () => true },
      findAccount: async (_ctx: unknown, id: string) => ({
        accountId: id,
        claims: async () => ({ sub: `sub-${id}`, email: id, email_verified: true }),
      }),
      // Consent is granted at once, so a sign-in is: login form, then back to the client.
      loadExistingGrant: async (ctx: { oidc: { provider: any; client: { clientId: string }; session: { accountId: string } } }) => {
        const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
        grant.addOIDCScope('openid email profile');
        grant.addOIDCClaims(['email', 'email_verified']);
        await grant.save();
        return grant;
      },
    });
    this.handler = provider.callback();
  }

  /** An ID token re-signed with the IdP's own key after the claims are changed: only the claims checks can catch it. */
  private resign(idToken: string, change: (c: Record<string, unknown>) => Record<string, unknown>): string {
    const [header, payload] = idToken.split('.');
    const claims = change(JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')));
    const body = `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
    const signature = createSign('RSA-SHA256').update(body).sign(this.signingKey).toString('base64url');
    return `${body}.${signature}`;
  }

  private interceptTokenResponse(res: ServerResponse) {
    const tamper = this.tamper!;
    const end = res.end.bind(res) as (chunk?: unknown) => ServerResponse;
    res.end = ((chunk?: unknown) => {
      const text = typeof chunk === 'string' ? chunk : Buffer.isBuffer(chunk) ? chunk.toString('utf8') : '';
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(text);
      } catch {
        return end(chunk);
      }
      if (typeof body.id_token === 'string')
        body.id_token = tamper(body.id_token, (change) => this.resign(body.id_token as string, change));
      const out = JSON.stringify(body);
      res.setHeader('content-length', Buffer.byteLength(out));
      return end(out);
    }) as typeof res.end;
  }

  async close() {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}
