import { isSealed, open, seal, sealedKeyId, type MasterKey } from './envelope.js';

/** The one field of a resource row that holds sealed values: the whole write-only subtree. */
const FIELD = 'secrets';

/**
 * Seals and opens the write-only part of resource rows (the `secrets` column, which holds
 * every value the kind schemas mark `x-secret`). New values are sealed with the primary
 * key; any configured key opens. A row still in clear JSON (written before encryption at
 * rest) opens as is until the start-up migration seals it.
 */
export class SecretCipher {
  readonly keys: ReadonlyMap<string, MasterKey>;

  constructor(
    readonly primary: MasterKey,
    others: MasterKey[] = [],
  ) {
    this.keys = new Map([...others, primary].map((k) => [k.id, k]));
  }

  seal(secrets: Record<string, unknown>, tenantId: string, resourceId: string): string {
    return seal(this.primary, JSON.stringify(secrets), { tenantId, resourceId, field: FIELD });
  }

  open(stored: string, tenantId: string, resourceId: string): Record<string, unknown> {
    if (!isSealed(stored)) return JSON.parse(stored);
    return JSON.parse(open(this.keys, stored, { tenantId, resourceId, field: FIELD }));
  }

  /** True when a stored value is in clear or sealed under another key than the primary. */
  needsReseal(stored: string): boolean {
    return sealedKeyId(stored) !== this.primary.id;
  }
}
