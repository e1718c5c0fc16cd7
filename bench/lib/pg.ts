import { withPg } from '../../test/support/postgres-server.js';

export { withPg };

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
