import { mkdir, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import lockfile from 'proper-lockfile';
import { advertisedUrl, type Advertise, type LeaderElector } from './types.js';
import { LeaderElectionError, LostListeners, abortError, jitter, sleep } from './shared.js';

/**
 * Leader election between local processes: an exclusive lock at `path` (proper-lockfile: an
 * atomic mkdir whose mtime the holder refreshes). A holder that dies without releasing (kill -9)
 * stops refreshing, so its lock goes stale `leaseSeconds` after the last refresh and a standby
 * that polls takes it over. Only for processes sharing one filesystem (not NFS across hosts).
 * The holder publishes its advertised URL in `<lock>.leader.json` (see leaderFile).
 */
export class LockElector implements LeaderElector {
  readonly description: string;
  private readonly path: string;
  private readonly staleMs: number;
  private unlock: (() => Promise<void>) | undefined;
  private readonly lost = new LostListeners();
  private released = new AbortController();
  /** Where the holder publishes its URL: next to the lock, not inside it (proper-lockfile removes the lock with rmdir). */
  readonly leaderFile: string;

  constructor(
    path: string,
    readonly identity: string,
    leaseSeconds = 15,
    private readonly advertise?: Advertise,
  ) {
    this.path = resolve(path);
    this.leaderFile = `${this.path}.leader.json`;
    this.description = `lock ${this.path}`;
    // proper-lockfile's floor is 2 s of staleness (and 1 s between refreshes).
    this.staleMs = Math.max(2_000, Math.round(leaseSeconds * 1000));
  }

  async acquire(signal: AbortSignal): Promise<void> {
    if (this.unlock) return;
    this.released = new AbortController();
    const stop = AbortSignal.any([signal, this.released.signal]);
    if (stop.aborted) throw abortError(stop);
    await mkdir(dirname(this.path), { recursive: true }).catch((err: NodeJS.ErrnoException) => {
      throw new LeaderElectionError(`cannot create the directory of the leader lock ${this.path}: ${err.message}`);
    });
    // A standby checks a few times per lease, so it takes over soon after the lock goes stale.
    const pollMs = Math.min(2_000, Math.max(200, this.staleMs / 5));
    for (;;) {
      try {
        const unlock = await lockfile.lock(this.path, {
          lockfilePath: this.path,
          realpath: false,
          stale: this.staleMs,
          // Refresh three times per lease, so one slow refresh does not make the lock stale.
          update: Math.max(1_000, Math.floor(this.staleMs / 3)),
          retries: 0,
          onCompromised: () => this.lose(),
        });
        if (stop.aborted) {
          await unlock().catch(() => undefined);
          throw abortError(stop);
        }
        this.unlock = unlock;
        await this.publish();
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ELOCKED') {
          if ((err as Error).name === 'AbortError') throw err;
          throw new LeaderElectionError(`cannot take the leader lock ${this.path}: ${(err as Error).message}`);
        }
      }
      await sleep(jitter(pollMs), stop);
    }
  }

  isLeader(): boolean {
    return this.unlock !== undefined;
  }

  onLost(listener: () => void): void {
    this.lost.add(listener);
  }

  async leaderUrl(): Promise<string | undefined> {
    // A lock nobody holds (released, or stale after its holder died) has no leader, whatever the file says.
    const held = await lockfile.check(this.path, { lockfilePath: this.path, realpath: false, stale: this.staleMs }).catch(() => false);
    if (!held) return undefined;
    const published = await this.readPublished();
    return published?.url || undefined;
  }

  async release(): Promise<void> {
    this.released.abort();
    const unlock = this.unlock;
    this.unlock = undefined;
    // Unpublish first: a standby must not forward to a replica that is going away.
    if (unlock) await this.unpublish();
    // If the lock was compromised meanwhile, unlocking fails with ENOTACQUIRED/ERELEASED: nothing to free.
    if (unlock) await unlock().catch(() => undefined);
  }

  /** Writes `{identity, url}` atomically (temp file + rename), so a reader never sees half a file. */
  private async publish() {
    const tmp = `${this.leaderFile}.${process.pid}.tmp`;
    const body = JSON.stringify({ identity: this.identity, url: advertisedUrl(this.advertise) ?? null, since: new Date().toISOString() });
    try {
      await writeFile(tmp, `${body}\n`);
      await rename(tmp, this.leaderFile);
    } catch {
      // Leading matters more than being reachable: standbys answer 503 and the interval still runs.
      await unlink(tmp).catch(() => undefined);
    }
  }

  /** Removes the file when it is still ours (a new holder may have replaced it already). */
  private async unpublish() {
    if ((await this.readPublished())?.identity === this.identity) await unlink(this.leaderFile).catch(() => undefined);
  }

  private async readPublished(): Promise<{ identity?: string; url?: string | null } | undefined> {
    try {
      return JSON.parse(await readFile(this.leaderFile, 'utf8')) as { identity?: string; url?: string | null };
    } catch {
      return undefined;
    }
  }

  /** The lock was refreshed too late or replaced by another process: we are no longer the leader. */
  private lose() {
    if (!this.unlock) return;
    this.unlock = undefined;
    this.lost.fire();
  }
}
