import { createHash, randomUUID } from 'node:crypto';
import { paramList, type Db } from '../store/db.js';
import { ApiError } from '../errors.js';

/** Failures of one key before it locks, and how long the locks last. */
export interface ThrottlePolicy {
  /** The attempt that brings the key's count to this number locks it (for `baseSeconds`). */
  lockAfter: number;
  /** First lock; each further counted attempt doubles it... */
  baseSeconds: number;
  /** ...up to this. */
  maxSeconds: number;
}

/**
 * Why three keys per login (see docs/security.md, "Login protection"):
 * - `account_address` (tenant, email, address) is the tight one: five guesses, then back-off
 *   from 1 s doubling to 15 min. It stops one address guessing one account, and since the
 *   owner logging in from elsewhere has another pair, the attack does not lock the owner out.
 * - `address` (address, across tenants and accounts) stops one address spraying a few guesses
 *   at many accounts. Successes are not counted against it (a NAT of many users stays usable).
 * - `account` (tenant, email, across addresses) is the ceiling against a distributed guess at
 *   one account. It is loose (100 failures) and its locks are short (60 s at most), so that it
 *   bounds a botnet to about one guess a minute while its owner waits a minute at worst per
 *   lock; a single address cannot reach it, because its own pair locks long before.
 * A success resets the account's keys (the owner proved who they are), never the address key
 * (an attacker holding one valid account would otherwise reset its address between guesses).
 */
export type ThrottleScope = 'account_address' | 'address' | 'account' | 'refresh_address';

export interface LoginThrottlePolicies {
  accountAddress: ThrottlePolicy;
  address: ThrottlePolicy;
  account: ThrottlePolicy;
  /** Failed refresh-token exchanges per address. */
  refreshAddress: ThrottlePolicy;
}

export function loginThrottlePolicies(o: {
  loginLockAfter: number;
  loginAddressLockAfter: number;
  loginAccountLockAfter: number;
  loginMaxLockSeconds: number;
}): LoginThrottlePolicies {
  const max = o.loginMaxLockSeconds;
  return {
    accountAddress: { lockAfter: o.loginLockAfter, baseSeconds: 1, maxSeconds: max },
    address: { lockAfter: o.loginAddressLockAfter, baseSeconds: 1, maxSeconds: max },
    account: { lockAfter: o.loginAccountLockAfter, baseSeconds: 1, maxSeconds: Math.min(max, ACCOUNT_CEILING_MAX_SECONDS) },
    refreshAddress: { lockAfter: o.loginAddressLockAfter, baseSeconds: 1, maxSeconds: max },
  };
}

export const ACCOUNT_CEILING_MAX_SECONDS = 60;

/** Seconds a key is locked for after its n-th counted attempt: 0 below the threshold, then doubling to the cap. */
export function lockSeconds(policy: ThrottlePolicy, n: number): number {
  if (n < policy.lockAfter) return 0;
  const doublings = Math.min(n - policy.lockAfter, 40);
  return Math.min(policy.maxSeconds, policy.baseSeconds * 2 ** doublings);
}

/**
 * lockSeconds as a SQL expression over `count`, in milliseconds, so the count and the lock are
 * written by one atomic statement: a burst of concurrent attempts cannot all pass before the
 * lock lands. The policy's numbers are integers from our options, never request input.
 */
export function lockMsSql(policy: ThrottlePolicy, count: string): string {
  const whens = [`WHEN ${count} < ${policy.lockAfter} THEN 0`];
  for (let n = policy.lockAfter; lockSeconds(policy, n) < policy.maxSeconds; n++)
    whens.push(`WHEN ${count} = ${n} THEN ${lockSeconds(policy, n) * 1000}`);
  return `(CASE ${whens.join(' ')} ELSE ${policy.maxSeconds * 1000} END)`;
}

export interface ThrottleKey {
  scope: ThrottleScope;
  /** sha256 of the scope and its parts: fixed length whatever the email, and no email at rest. */
  id: string;
  policy: ThrottlePolicy;
  /** Deleted on success (the account's keys), or only this attempt taken back (address keys). */
  onSuccess: 'reset' | 'uncount';
}

export interface Lock {
  scope: ThrottleScope;
  seconds: number;
  failures: number;
}

const keyId = (...parts: string[]) => createHash('sha256').update(JSON.stringify(parts)).digest('hex');
const normalEmail = (email: string) => email.trim().toLowerCase();

/** The rows of one counted attempt; a finished attempt is settled with succeeded() or left as a failure. */
export class Attempt {
  constructor(
    private readonly throttle: LoginThrottle,
    readonly id: string,
    private readonly keys: ThrottleKey[],
    /** Locks this attempt started (it is the attempt that reached a threshold). */
    readonly locks: Lock[],
  ) {}

  succeeded(): Promise<void> {
    return this.throttle.settleSuccess(this.id, this.keys);
  }
}

/**
 * Throttles failed sign-ins with exponential back-off, in the database so every replica on one
 * PostgreSQL shares it. One row per key (hashed), expiring `maxSeconds` after its last lock ends;
 * expired rows are deleted through the expiry index: a batch at most once a minute, and with every
 * attempt twice as many as it can add. The second part keeps the table at the rows still alive
 * under any flood: sign-ins from many addresses (anyone can try, on any tenant) add up to three rows
 * each, which a batch a minute alone fell behind from about 170 attempts a minute.
 * Every attempt is counted before the password is checked (and taken back on success), so a
 * locked key answers 429 without any hash work, and a parallel burst cannot race the lock.
 */
export class LoginThrottle {
  private lastCleanup = 0;
  constructor(
    private readonly db: Db,
    readonly policies: LoginThrottlePolicies,
    private readonly clock: () => number,
  ) {}

  loginKeys(tenantId: string, email: string, address: string): ThrottleKey[] {
    const account = normalEmail(email);
    // Order matters: the most specific key is counted first, so an attempt refused by a wider
    // key has not been counted on it (a locked pair never feeds the account ceiling).
    return [
      {
        scope: 'account_address',
        id: keyId('account_address', tenantId, account, address),
        policy: this.policies.accountAddress,
        onSuccess: 'reset',
      },
      { scope: 'address', id: keyId('address', address), policy: this.policies.address, onSuccess: 'uncount' },
      { scope: 'account', id: keyId('account', tenantId, account), policy: this.policies.account, onSuccess: 'reset' },
    ];
  }

  refreshKeys(address: string): ThrottleKey[] {
    return [
      { scope: 'refresh_address', id: keyId('refresh_address', address), policy: this.policies.refreshAddress, onSuccess: 'uncount' },
    ];
  }

  /** Counts an attempt on every key, or throws 429 rate_limited with Retry-After when one is locked. */
  async admit(keys: ThrottleKey[]): Promise<Attempt> {
    const now = this.clock();
    // The common case for a throttled client: one indexed read, no write.
    const locked = await this.db.all<{ locked_until: number | string }>(
      `SELECT locked_until FROM login_throttle WHERE key IN (${paramList(keys.length)}) AND locked_until > ?`,
      [...keys.map((k) => k.id), now],
    );
    if (locked.length) throw throttled(Math.max(...locked.map((r) => Number(r.locked_until))) - now);
    const attemptId = randomUUID();
    const locks: Lock[] = [];
    for (const key of keys) {
      const row = await this.count(key, attemptId, now);
      if (row.attempt_id !== attemptId) throw throttled(Number(row.locked_until) - now);
      const lockedUntil = Number(row.locked_until);
      if (lockedUntil > now)
        locks.push({ scope: key.scope, seconds: Math.round((lockedUntil - now) / 1000), failures: Number(row.failures) });
    }
    this.cleanup(now, keys.length);
    return new Attempt(this, attemptId, keys, locks);
  }

  /** One atomic upsert: unless the key is locked, count the attempt, stamp it ours, and lock if it reaches the threshold. */
  private async count(key: ThrottleKey, attemptId: string, now: number) {
    const p = key.policy;
    const memoryMs = p.maxSeconds * 1000;
    const firstLock = lockSeconds(p, 1) * 1000;
    const next = 'login_throttle.failures + 1';
    // Below the threshold locked_until is 0, not "now": a concurrent request that read the clock a
    // moment earlier must not take another's "now" for a lock.
    const sets: [string, string, number[]][] = [
      ['failures', `${next}`, []],
      ['locked_until', `CASE WHEN ${next} < ${p.lockAfter} THEN 0 ELSE CAST(? AS BIGINT) + ${lockMsSql(p, next)} END`, [now]],
      ['expires_at', `CAST(? AS BIGINT) + ${lockMsSql(p, next)}`, [now + memoryMs]],
      ['attempt_id', 'excluded.attempt_id', []],
    ];
    const isLocked = 'login_throttle.locked_until > CAST(? AS BIGINT)';
    const setSql = sets
      .map(([column, value]) => `${column} = CASE WHEN ${isLocked} THEN login_throttle.${column} ELSE ${value} END`)
      .join(',\n         ');
    const setParams = sets.flatMap(([, , params]) => [now, ...params]);
    const row = await this.db.write<{ failures: number | string; locked_until: number | string; attempt_id: string }>(
      `INSERT INTO login_throttle (key, failures, locked_until, attempt_id, expires_at) VALUES (?, 1, CAST(? AS BIGINT), ?, CAST(? AS BIGINT))
       ON CONFLICT (key) DO UPDATE SET
         ${setSql}
       RETURNING failures, locked_until, attempt_id`,
      [key.id, firstLock ? now + firstLock : 0, attemptId, now + firstLock + memoryMs, ...setParams],
    );
    return row!;
  }

  /** @internal Through Attempt.succeeded(). */
  async settleSuccess(attemptId: string, keys: ThrottleKey[]): Promise<void> {
    // Each key is its own row: the statements go out at once (on PostgreSQL one round trip's wait, not one per key).
    await Promise.all(
      keys.map((key) =>
        key.onSuccess === 'reset'
          ? this.db.run('DELETE FROM login_throttle WHERE key = ?', [key.id])
          : // Take back this attempt only; a lock it started is lifted unless a later attempt has taken over the row.
            this.db.run(
              `UPDATE login_throttle SET failures = failures - 1, locked_until = CASE WHEN attempt_id = ? THEN 0 ELSE locked_until END WHERE key = ? AND failures > 0`,
              [attemptId, key.id],
            ),
      ),
    );
  }

  /**
   * Expired rows go through the expiry index in bounded batches, so no sweep holds SQLite's write
   * lock for long: CLEANUP_BATCH once a minute, SWEEP_PER_KEY per key of every attempt otherwise.
   */
  private cleanup(now: number, keys: number) {
    const minuteBatch = now - this.lastCleanup >= 60_000;
    if (minuteBatch) this.lastCleanup = now;
    const batch = minuteBatch ? CLEANUP_BATCH : keys * SWEEP_PER_KEY;
    this.db
      .run(
        `DELETE FROM login_throttle WHERE key IN (SELECT key FROM login_throttle WHERE expires_at < ? ORDER BY expires_at LIMIT ${batch})`,
        [now],
      )
      .catch(() => undefined);
  }
}

/** Expired rows deleted by the once-a-minute batch. */
const CLEANUP_BATCH = 500;
/** Expired rows each attempt deletes per key it counts on (it adds at most one row per key). */
const SWEEP_PER_KEY = 2;

function throttled(remainingMs: number): ApiError {
  const retryAfter = Math.max(1, Math.ceil(remainingMs / 1000));
  return new ApiError('rate_limited', `Too many failed sign-in attempts; retry in ${retryAfter} s`, undefined, 429, {
    'Retry-After': String(retryAfter),
  });
}
