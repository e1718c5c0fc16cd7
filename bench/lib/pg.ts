import pg from 'pg';

/** One connection for `fn`, closed after it whatever happens. */
export async function withPg<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** A fresh database `name` on the server of `adminUrl` (dropped first if it exists); resolves to its URL. */
export async function freshDatabase(adminUrl: string, name: string): Promise<string> {
  await withPg(adminUrl, async (c) => {
    await c.query(`DROP DATABASE IF EXISTS ${name}`);
    await c.query(`CREATE DATABASE ${name}`);
  });
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}
