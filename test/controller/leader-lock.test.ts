import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { once } from 'node:events';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createElector } from '../../src/controller/leader/index.js';

/**
 * The `lock` elector between real processes: each child takes the lock, prints LEADER when it
 * leads, LOST when it loses it, and releases it on SIGTERM.
 */
const LEASE_SECONDS = 3;
const ELECTOR = resolve('src/controller/leader/index.ts');
const dir = mkdtempSync(join(tmpdir(), 'dpctl-leader-lock-'));
const lockPath = join(dir, 'state', 'leader.lock');

const CHILD = `
import { createElector } from ${JSON.stringify(ELECTOR)};
const elector = createElector({ kind: 'lock', path: process.env.LOCK_PATH, identity: process.env.ID, leaseSeconds: Number(process.env.LEASE), advertise: process.env.ADVERTISE });
elector.onLost(() => console.log('LOST'));
process.on('SIGTERM', async () => {
  await elector.release();
  console.log('RELEASED');
  process.exit(0);
});
console.log('STARTED');
await elector.acquire(new AbortController().signal);
console.log('LEADER ' + elector.identity);
setInterval(() => { if (!elector.isLeader()) console.log('NOT-LEADER'); }, 250);
`;

interface Child {
  id: string;
  proc: ChildProcess;
  lines: string[];
  /** When the child printed `line` first (ms since epoch). */
  when(line: string): Promise<number>;
}

const children: Child[] = [];
/** What each child advertises while it leads. */
const urlOf = (id: string) => `http://replica-${id}.test:9090`;
/** Reads the published leader URL like a standby would, without taking part. */
const observer = createElector({ kind: 'lock', path: lockPath, identity: 'observer', leaseSeconds: LEASE_SECONDS });

function startChild(id: string): Child {
  const proc = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', CHILD], {
    env: { ...process.env, LOCK_PATH: lockPath, ID: id, LEASE: String(LEASE_SECONDS), ADVERTISE: urlOf(id) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const seen = new Map<string, number>();
  const waiters: Array<{ line: string; resolve: (at: number) => void }> = [];
  let buffer = '';
  proc.stdout!.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl).trim().split(' ')[0];
      buffer = buffer.slice(nl + 1);
      lines.push(line);
      if (!seen.has(line)) seen.set(line, Date.now());
      for (const w of waiters.filter((w) => w.line === line)) w.resolve(seen.get(line)!);
    }
  });
  let stderr = '';
  proc.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  proc.on('exit', (code, signal) => {
    if (code && code !== 0) lines.push(`EXIT ${code}: ${stderr}`);
    else lines.push(`EXIT ${signal ?? code}`);
  });
  const child: Child = {
    id,
    proc,
    lines,
    when: (line) =>
      seen.has(line)
        ? Promise.resolve(seen.get(line)!)
        : new Promise((resolve, reject) => {
            waiters.push({ line, resolve });
            proc.once('exit', () =>
              setTimeout(
                () => (seen.has(line) ? resolve(seen.get(line)!) : reject(new Error(`${id} exited before ${line}: ${lines.join(' | ')}`))),
                50,
              ),
            );
          }),
  };
  children.push(child);
  return child;
}

const leads = (c: Child) => c.lines.includes('LEADER');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.proc.exitCode === null && c.proc.signalCode === null) {
      c.proc.kill('SIGKILL');
      await once(c.proc, 'exit');
    }
  }
  rmSync(lockPath, { recursive: true, force: true });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('lock leader election between processes', () => {
  it('lets exactly one process lead; after kill -9 the standby takes over once the lock goes stale; release hands over at once', async () => {
    const a = startChild('a');
    const b = startChild('b');
    await Promise.all([a.when('STARTED'), b.when('STARTED')]);
    const first = await Promise.race([a.when('LEADER').then(() => a), b.when('LEADER').then(() => b)]);
    const standby = first === a ? b : a;
    // Longer than the lease: the leader keeps refreshing, so the standby never sees it stale.
    await sleep(LEASE_SECONDS * 1000 + 1000);
    expect(leads(first)).toBe(true);
    expect(leads(standby)).toBe(false);
    expect(first.lines).not.toContain('LOST');
    expect(first.lines).not.toContain('NOT-LEADER');
    expect(await observer.leaderUrl()).toBe(urlOf(first.id));

    // kill -9: no release, no exit handler. The lock stays until its mtime is older than the lease.
    const killedAt = Date.now();
    first.proc.kill('SIGKILL');
    const tookOverAt = await standby.when('LEADER');
    const takeover = tookOverAt - killedAt;
    // The last refresh was at most lease/3 before the kill, so the lock cannot be stale sooner than 2/3 of the lease.
    expect(takeover).toBeGreaterThan((LEASE_SECONDS * 1000 * 2) / 3 - 200);
    // ... and a standby polling every lease/5 sees it within the lease plus one poll (and process latency).
    expect(takeover).toBeLessThan(LEASE_SECONDS * 1000 + 1500);
    expect(await observer.leaderUrl()).toBe(urlOf(standby.id));

    // A third process waits; SIGTERM makes the leader release, and the lock changes hands without waiting for staleness.
    const c = startChild('c');
    await c.when('STARTED');
    await sleep(500);
    expect(leads(c)).toBe(false);
    const releasedAt = Date.now();
    standby.proc.kill('SIGTERM');
    await standby.when('RELEASED');
    const cLeadsAt = await c.when('LEADER');
    expect(cLeadsAt - releasedAt).toBeLessThan(LEASE_SECONDS * 1000 * (2 / 3) - 200);
    expect(await observer.leaderUrl()).toBe(urlOf(c.id));
  }, 30_000);
});

describe('lock leader election in one process', () => {
  it('reports the loss when another process replaces the lock, and stops a waiting acquire on abort', async () => {
    const path = join(dir, 'inproc.lock');
    const leader = createElector({ kind: 'lock', path, identity: 'one', leaseSeconds: 2, advertise: 'http://one.test:9090' });
    await leader.acquire(new AbortController().signal);
    expect(leader.isLeader()).toBe(true);
    expect(leader.description).toBe(`lock ${path}`);
    let lost = 0;
    leader.onLost(() => lost++);

    // A second elector cannot get it while it is held, and gives up when aborted.
    const standby = createElector({ kind: 'lock', path, identity: 'two', leaseSeconds: 2, advertise: () => 'http://two.test:9090' });
    const abort = new AbortController();
    const waiting = standby.acquire(abort.signal);
    await sleep(700);
    expect(standby.isLeader()).toBe(false);
    abort.abort();
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError' });
    // The holder published its URL next to the lock; the standby reads it there.
    expect(JSON.parse(readFileSync(`${path}.leader.json`, 'utf8'))).toMatchObject({ identity: 'one', url: 'http://one.test:9090' });
    expect(await standby.leaderUrl()).toBe('http://one.test:9090');

    // Someone else touched the lock (as a process that took it over would): the holder notices on its next refresh.
    const past = new Date(Date.now() - 60_000);
    utimesSync(path, past, past);
    const deadline = Date.now() + 3_000;
    while (lost === 0 && Date.now() < deadline) await sleep(50);
    expect(lost).toBe(1);
    expect(leader.isLeader()).toBe(false);
    // A stale lock has no leader, although the file of the one that lost it is still there.
    expect(existsSync(`${path}.leader.json`)).toBe(true);
    expect(await standby.leaderUrl()).toBeUndefined();
    await leader.release();

    // The stale lock is free to take.
    await standby.acquire(new AbortController().signal);
    expect(standby.isLeader()).toBe(true);
    expect(await leader.leaderUrl()).toBe('http://two.test:9090');
    await standby.release();
    expect(standby.isLeader()).toBe(false);
    // Released: unpublished first, then unlocked.
    expect(existsSync(`${path}.leader.json`)).toBe(false);
    expect(await leader.leaderUrl()).toBeUndefined();
  });

  it('none is always the leader', async () => {
    const elector = createElector({ kind: 'none' });
    await elector.acquire(new AbortController().signal);
    expect(elector.isLeader()).toBe(true);
  });
});
