import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { expect, test } from 'vitest';
import { DataPlatformClient } from '../../src/client/index.js';
import { DirectorySource, startController } from '../../src/controller/index.js';
import type { LeaderElector } from '../../src/controller/leader/types.js';
import { waitFor } from './helpers.js';

/** An elector driven by the test: leadership is granted and taken away on demand. */
class ScriptedElector implements LeaderElector {
  readonly description = 'scripted';
  readonly identity = 'test-replica';
  leader = false;
  released = false;
  private grant: (() => void) | undefined;
  private lostListeners: (() => void)[] = [];
  acquire(signal: AbortSignal): Promise<void> {
    if (this.leader) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.grant = () => {
        this.leader = true;
        resolve();
      };
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
  }
  isLeader() {
    return this.leader;
  }
  onLost(listener: () => void) {
    this.lostListeners.push(listener);
  }
  async release() {
    this.released = true;
    this.leader = false;
  }
  /** No other replica here to forward to. */
  async leaderUrl() {
    return undefined;
  }
  win() {
    this.grant?.();
  }
  lose() {
    this.leader = false;
    for (const l of this.lostListeners) l();
  }
}

test(
  'only the leader runs; a standby is ready and idle; leadership lost stops the runs until won again; stop releases it',
  { timeout: 30_000 },
  async () => {
    const elector = new ScriptedElector();
    const ctl = await startController({
      // A source that fails to fetch: runs are counted without any API call.
      source: new DirectorySource(join(tmpdir(), 'dp-ctl-no-such-dir')),
      client: new DataPlatformClient({ url: 'https://unused.localhost:1', apiKey: 'dpk_unused' }),
      mode: 'apply',
      intervalMs: 100,
      engine: { sourceId: 'x' },
      listen: { host: '127.0.0.1', port: 0 },
      elector,
      logger: pino({ level: 'silent' }),
      processMetrics: false,
    });
    try {
      await new Promise((r) => setTimeout(r, 400));
      expect(ctl.status()).toMatchObject({
        runs: 0,
        controller: { ready: true, leader: { elected: false, identity: 'test-replica', election: 'scripted' } },
      });
      expect((await fetch(`${ctl.url}/readyz`)).status).toBe(200);

      elector.win();
      await waitFor('runs as leader', () => ctl.status().runs >= 2);
      expect(ctl.status().controller.leader.elected).toBe(true);
      expect(ctl.status().last_run).toMatchObject({ result: 'error', errors: [expect.stringContaining('not a directory')] });
      // A leader that never fetched is not ready.
      expect((await fetch(`${ctl.url}/readyz`)).status).toBe(503);
      expect(await (await fetch(`${ctl.url}/metrics`)).text()).toMatch(/^dpctl_controller_leader 1$/m);

      elector.lose();
      await waitFor('standby again', () => !ctl.status().controller.leader.elected);
      const runs = ctl.status().runs;
      await new Promise((r) => setTimeout(r, 500));
      expect(ctl.status().runs).toBeLessThanOrEqual(runs + 1); // at most the run in flight
      const idle = ctl.status().runs;
      await new Promise((r) => setTimeout(r, 300));
      expect(ctl.status().runs).toBe(idle);
      expect(await (await fetch(`${ctl.url}/metrics`)).text()).toMatch(/^dpctl_controller_leader 0$/m);

      elector.win();
      await waitFor('runs again', () => ctl.status().runs > idle + 1);
    } finally {
      await ctl.stop();
    }
    expect(elector.released).toBe(true);
  },
);
