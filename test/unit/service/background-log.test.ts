import { describe, expect, it } from 'vitest';
import { BackgroundLog } from '../../../src/service/runtime/background-log.js';
import { isDatabaseUnavailable } from '../../../src/service/store/unavailable.js';

const coded = (message: string, code: string) => Object.assign(new Error(message), { code });

describe('isDatabaseUnavailable', () => {
  it('knows a refused, dropped or shutting-down database, also as the cause or inside an AggregateError', () => {
    for (const err of [
      coded('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED'),
      coded('terminating connection due to administrator command', '57P01'),
      coded('the database system is starting up', '57P03'),
      coded('connection failure', '08006'),
      coded('sorry, too many clients already', '53300'),
      new Error('Connection terminated unexpectedly'),
      new Error('wrapped', { cause: coded('read ECONNRESET', 'ECONNRESET') }),
      new AggregateError([coded('connect ECONNREFUSED ::1:5432', 'ECONNREFUSED')], ''),
    ])
      expect(isDatabaseUnavailable(err), err.message).toBe(true);
  });

  it('does not mistake a failed statement, or something not an error, for an outage', () => {
    for (const err of [
      coded('duplicate key value violates unique constraint', '23505'),
      coded('canceling statement due to statement timeout', '57014'),
      coded('SQLITE_CONSTRAINT: UNIQUE constraint failed', 'SQLITE_CONSTRAINT_UNIQUE'),
      new TypeError("Cannot read properties of undefined (reading 'id')"),
      'ECONNREFUSED',
      undefined,
    ])
      expect(isDatabaseUnavailable(err), String(err)).toBe(false);
  });
});

describe('BackgroundLog', () => {
  const setup = () => {
    const lines: { level: string; obj: Record<string, unknown>; msg: string }[] = [];
    let now = 1_000_000;
    const log = new BackgroundLog(
      {
        error: (obj, msg) => void lines.push({ level: 'error', obj: obj as Record<string, unknown>, msg }),
        info: (obj, msg) => void lines.push({ level: 'info', obj: obj as Record<string, unknown>, msg }),
      },
      () => now,
    );
    return { lines, log, advance: (ms: number) => (now += ms) };
  };
  const refused = () => coded('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED');

  it('says an outage once, without a stack, counts the failures after it, and says when the database answers again', () => {
    const { lines, log, advance } = setup();
    log.error({ err: refused() }, 'runtime heartbeat failed');
    for (let i = 0; i < 11; i++) {
      advance(5_000);
      log.error({ err: refused() }, i % 2 ? 'scheduler tick failed' : 'runtime sweep failed');
    }
    expect(lines).toEqual([
      {
        level: 'error',
        obj: { failed: 'runtime heartbeat failed', reason: 'connect ECONNREFUSED 127.0.0.1:5432' },
        msg: expect.stringMatching(/^the database is unavailable: /),
      },
    ]);
    expect(log.inOutage).toBe(true);
    advance(3_000);
    log.answered();
    log.answered();
    expect(lines.slice(1)).toEqual([{ level: 'info', obj: { seconds: 58, unlogged: 11 }, msg: 'the database answers again' }]);
    expect(log.inOutage).toBe(false);
    // A second outage is said again.
    log.error({ err: new Error('Connection terminated unexpectedly') }, 'scheduler tick failed');
    expect(lines).toHaveLength(3);
  });

  it('logs any other failure as it is, error and all, even during an outage', () => {
    const { lines, log } = setup();
    log.error({ err: refused() }, 'runtime heartbeat failed');
    const bug = new TypeError('x is undefined');
    log.error({ err: bug, runId: 'run_1' }, 'run execution failed');
    log.error({ err: bug }, 'scheduler tick failed');
    expect(lines.slice(1)).toEqual([
      { level: 'error', obj: { err: bug, runId: 'run_1' }, msg: 'run execution failed' },
      { level: 'error', obj: { err: bug }, msg: 'scheduler tick failed' },
    ]);
    log.info({ n: 1 }, 'info passes through');
    expect(lines.at(-1)).toEqual({ level: 'info', obj: { n: 1 }, msg: 'info passes through' });
  });
});
