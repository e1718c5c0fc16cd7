import type { Db } from '../../src/service/store/db.js';
import { AUDIT_ROW_BYTES } from '../../src/service/store/usage.js';

/** What a tenant stores, counted from scratch: what the usage triggers (store/usage.ts) must agree with. */
export async function recountUsage(db: Db, tenantId: string): Promise<number> {
  const row = await db.get<{ bytes: number | string }>(
    `SELECT (SELECT coalesce(sum(octet_length(data) + coalesce(octet_length(secrets), 0)), 0) FROM resources WHERE tenant_id = ?)
          + (SELECT coalesce(sum(${AUDIT_ROW_BYTES} + coalesce(octet_length(diff), 0)), 0) FROM audit_logs WHERE tenant_id = ?) AS bytes`,
    [tenantId, tenantId],
  );
  return Number(row!.bytes);
}
