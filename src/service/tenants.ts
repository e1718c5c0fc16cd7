import type { Db } from './store/db.js';
import { newId, nowIso } from './ids.js';

export interface Tenant {
  id: string;
  slug: string;
  name: string;
}

export const SLUG_PATTERN = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** Tenants by slug. Found tenants are cached (they are never renamed); misses always ask the database. */
export class TenantStore {
  private readonly cache = new Map<string, Tenant>();
  constructor(private readonly db: Db) {}

  async bySlug(slug: string): Promise<Tenant | undefined> {
    const cached = this.cache.get(slug);
    if (cached) return cached;
    const row = await this.db.get<Tenant>('SELECT id, slug, name FROM tenants WHERE slug = ?', [slug]);
    if (row) this.cache.set(slug, row);
    return row;
  }

  async create(slug: string, name = slug): Promise<Tenant> {
    if (!SLUG_PATTERN.test(slug)) throw new Error(`tenant slug "${slug}" must be lowercase letters, digits and dashes (a DNS label)`);
    const tenant = { id: newId('tenant'), slug, name };
    await this.db.run('INSERT INTO tenants (id, slug, name, created_at) VALUES (?, ?, ?, ?)', [tenant.id, slug, name, nowIso()]);
    return tenant;
  }
}

/** `acme.localhost:8443` -> `acme`; with a base domain, `acme.data.example.com` -> `acme`. */
export function tenantSlugFromHost(host: string | undefined, baseDomain?: string): string | undefined {
  if (!host) return undefined;
  const name = host.replace(/:\d+$/, '').toLowerCase();
  for (const suffix of ['localhost', baseDomain].filter(Boolean) as string[]) {
    if (name.endsWith(`.${suffix}`)) {
      const slug = name.slice(0, -suffix.length - 1);
      return SLUG_PATTERN.test(slug) ? slug : undefined;
    }
  }
  return undefined;
}
