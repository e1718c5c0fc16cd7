import { Agent, request } from 'undici';
import { readFileSync } from 'node:fs';
import { localhostLookup } from './http.js';

export interface BrowserResponse {
  url: string;
  status: number;
  location?: string;
  text: string;
  body: any;
}

/**
 * Just enough of a browser for sign-in flows: it trusts the given CAs, keeps cookies per host
 * (oidc-provider's interaction cookies), and lets the test follow redirects one at a time,
 * so it can stop at the service's callback or tamper with it.
 */
export class TestBrowser {
  private readonly agent: Agent;
  private readonly cookies = new Map<string, Map<string, string>>();

  constructor(caPems: string[]) {
    this.agent = new Agent({ connect: { ca: caPems, lookup: localhostLookup } });
  }

  static trusting(caFiles: string[], extraPems: string[] = []) {
    return new TestBrowser([...caFiles.map((f) => readFileSync(f, 'utf8')), ...extraPems]);
  }

  private jar(url: URL) {
    let jar = this.cookies.get(url.host);
    if (!jar) this.cookies.set(url.host, (jar = new Map()));
    return jar;
  }

  async fetch(url: string, init: { method?: string; form?: Record<string, string> } = {}): Promise<BrowserResponse> {
    const u = new URL(url);
    const jar = this.jar(u);
    const headers: Record<string, string> = { accept: 'text/html,application/json' };
    if (jar.size) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    let body: string | undefined;
    if (init.form) {
      body = new URLSearchParams(init.form).toString();
      headers['content-type'] = 'application/x-www-form-urlencoded';
    }
    const res = await request(u, { method: (init.method ?? (init.form ? 'POST' : 'GET')) as 'GET', headers, body, dispatcher: this.agent });
    const setCookie = res.headers['set-cookie'];
    for (const line of Array.isArray(setCookie) ? setCookie : setCookie ? [setCookie] : []) {
      const [pair] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      if (/expires=Thu, 01 Jan 1970/i.test(line) || value === '') jar.delete(name);
      else jar.set(name, value);
    }
    const text = await res.body.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const location = res.headers.location ? new URL(String(res.headers.location), u).href : undefined;
    return { url: u.href, status: res.statusCode, location, text, body: parsed };
  }

  /** Follows redirects until one leaves for a URL `stop` accepts (not fetched), or a page that is not a redirect. */
  async follow(
    url: string,
    stop: (next: string) => boolean = () => false,
    init: { method?: string; form?: Record<string, string> } = {},
  ): Promise<BrowserResponse> {
    let res = await this.fetch(url, init);
    for (let hops = 0; res.location && hops < 20; hops++) {
      if (stop(res.location)) return res;
      res = await this.fetch(res.location);
    }
    return res;
  }

  /** A fresh browser profile: no IdP session, so the next sign-in shows the login form. */
  clearCookies() {
    this.cookies.clear();
  }

  close() {
    return this.agent.close();
  }
}
