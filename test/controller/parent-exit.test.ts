import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../support/service.js';
import { groupLeftAfter, groupMembers, spawnInGroup } from '../support/processes.js';
import { cliEnvFor } from '../integration/engine/helpers.js';

/**
 * `npx dpctl controller ...` stopped the way a process manager or a CI step stops it: SIGTERM to
 * npm alone. npm forwards it to the `sh -c` running the command, which on dash neither execs node
 * nor passes the signal on; the controller then lived on re-parented to init, still reconciling.
 * It now stops with its parent, as `dpctl serve` does (test/cli/start.test.ts).
 */
const ROOT = join(import.meta.dirname, '..', '..');
let svc: TestService;
let pid: number | undefined;

beforeAll(async () => {
  svc = await startTestService();
});
afterEach(() => {
  // A failed run must not leave a controller behind for the rest of the suite.
  if (pid && groupMembers(pid).length) process.kill(-pid, 'SIGKILL');
  pid = undefined;
});
afterAll(async () => {
  await svc?.close();
});

describe('npx dpctl controller', () => {
  it('stops when npm alone gets SIGTERM: nothing of it left running', async () => {
    const t = await svc.tenant();
    const source = join(mkdtempSync(join(tmpdir(), 'dp-ctl-npx-')), 'npx');
    mkdirSync(source);
    writeFileSync(join(source, 'project.yaml'), 'apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: npx\nspec:\n  description: x\n');
    const state = mkdtempSync(join(tmpdir(), 'dp-ctl-state-'));
    const npx = spawnInGroup(
      'npx',
      ['dpctl', 'controller', '--source', source, '--source-id', 'npx', '--listen', '127.0.0.1:0', '--interval', '1s', '--state-dir', state],
      { cwd: ROOT, env: { ...process.env, ...cliEnvFor(svc, t), npm_config_update_notifier: 'false', DPCTL_WEBHOOK_SECRET: '' } },
    );
    pid = npx.pid;
    const deadline = Date.now() + 40_000;
    // Up, and it has reconciled once (the project exists): a controller at work, not one starting.
    while (!npx.output().includes('"msg":"status listener up"') || !(await svc.ok<{ data: unknown[] }>(t, 'GET', '/projects')).data.length) {
      if (Date.now() > deadline || npx.child.exitCode !== null) throw new Error(`npx dpctl controller did not come up\n${npx.output()}`);
      await new Promise((r) => setTimeout(r, 200));
    }

    process.kill(pid, 'SIGTERM');
    expect(await groupLeftAfter(pid, 8_000), `processes of npx dpctl controller still running 8 s after the signal\n${npx.output()}`).toEqual([]);
    expect(npx.output()).toMatch(/"signal":"parent process exited".*"msg":"shutting down"/);
  }, 60_000);
});
