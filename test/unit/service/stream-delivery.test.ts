import { describe, expect, test } from 'vitest';
import type { WebSocket } from 'ws';
import { UnstoredUpdates } from '../../../src/service/streams/unstored.js';
import { RunDelivery, snapshot } from '../../../src/service/streams/run-delivery.js';
import { Outbox, BATCH_MAX_TURNS, MAX_BUFFERED_BYTES } from '../../../src/service/streams/outbox.js';
import { alertsKey, closeSocket, Connections, eventKey, runKey, type Connection } from '../../../src/service/streams/connections.js';
import type { RunData } from '../../../src/service/runtime/runs.js';

const update = (step: string, status: string) => ({ type: 'step_update', step_id: step, status });

describe('updates announced and not stored yet', () => {
  test('kept per run in announce order until their run_stored, copied for a new subscriber', () => {
    const kept = new UnstoredUpdates();
    kept.remember('r1', 1, update('a', 'running'));
    kept.remember('r1', 2, update('a', 'completed'));
    kept.remember('r1', 3, update('b', 'running'));
    kept.remember('r2', 1, update('x', 'running'));
    expect(kept.size).toBe(2);
    const copy = kept.announced('r1');
    expect(copy).toEqual([update('a', 'running'), update('a', 'completed'), update('b', 'running')]);
    kept.forget('r1', 2);
    expect(kept.announced('r1')).toEqual([update('b', 'running')]);
    expect(copy).toHaveLength(3);
    kept.forget('r1', 3);
    expect([kept.size, kept.announced('r1')]).toEqual([1, []]);
    kept.forget('unknown', 10);
    expect(kept.size).toBe(1);
  });

  test('a run not announced to within the TTL is dropped (its process died before run_stored)', () => {
    let now = 1_000;
    const kept = new UnstoredUpdates(() => now);
    kept.remember('old', 1, update('a', 'running'));
    now = 5_000;
    kept.remember('new', 1, update('a', 'running'));
    now = 7_000;
    kept.prune(4_000);
    expect([kept.announced('old'), kept.announced('new')]).toEqual([[], [update('a', 'running')]]);
  });
});

describe('the catch-up of a run stream', () => {
  const run = (steps: Partial<RunData['steps'][number]>[], extra: Partial<RunData> = {}) =>
    ({ started_at: '2026-01-01T00:00:00Z', finished_at: null, steps, ...extra }) as unknown as RunData;

  test('snapshot: running then final status per step, in time order, steps in order on equal times', () => {
    const messages = snapshot(
      run([
        { step_id: 's1', step_name: 'extract', status: 'completed', started_at: 'T1', finished_at: 'T2', duration_seconds: 4 },
        { step_id: 's2', step_name: 'load', status: 'running', started_at: 'T2', finished_at: null, duration_seconds: null },
        { step_id: 's3', step_name: 'notify', status: 'pending', started_at: null, finished_at: null, duration_seconds: null },
      ]),
    );
    expect(messages.map((m) => `${m.step_id}:${m.status}@${m.timestamp}`)).toEqual(['s1:running@T1', 's1:completed@T2', 's2:running@T2']);
    expect(messages[1]).toEqual({
      type: 'step_update',
      step_id: 's1',
      step_name: 'extract',
      status: 'completed',
      duration_seconds: 4,
      timestamp: 'T2',
    });
  });

  test('snapshot: a step skipped without times is stamped with the run finish, else its start', () => {
    const skipped = {
      step_id: 's1',
      step_name: 'x',
      status: 'skipped' as const,
      started_at: null,
      finished_at: null,
      duration_seconds: null,
    };
    expect(snapshot(run([skipped], { finished_at: 'TF' } as Partial<RunData>))[0].timestamp).toBe('TF');
    expect(snapshot(run([skipped]))[0].timestamp).toBe('2026-01-01T00:00:00Z');
  });

  test('live updates wait for the catch-up; each (step, status) is written once', () => {
    const written: string[] = [];
    const delivery = new RunDelivery((m) => written.push(`${m.step_id}:${m.status}`));
    delivery.live(update('b', 'running'));
    delivery.live(update('b', 'completed'));
    expect(written).toEqual([]);
    delivery.catchUp([update('a', 'running'), update('a', 'completed')]);
    delivery.goLive([update('a', 'completed'), update('b', 'running')]);
    expect(written).toEqual(['a:running', 'a:completed', 'b:running', 'b:completed']);
    delivery.live(update('b', 'completed'));
    delivery.live(update('c', 'running'));
    expect(written.slice(4)).toEqual(['c:running']);
  });
});

/** A socket as the outbox sees it: not a ws one, so messages go through send(). */
function fakeSocket(state: 'open' | 'closed' = 'open') {
  const sent: string[] = [];
  const socket = {
    OPEN: 1,
    CONNECTING: 0,
    readyState: state === 'open' ? 1 : 3,
    bufferedAmount: 0,
    terminated: false,
    terminate() {
      this.terminated = true;
    },
    send: (payload: Buffer) => sent.push(payload.toString()),
    closed: undefined as [number, string] | undefined,
    close(code: number, reason: string) {
      this.closed = [code, reason];
    },
  };
  return { socket: socket as unknown as WebSocket & typeof socket, sent };
}
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('the batching outbox', () => {
  test('messages of one turn go out together after it, each serialised once, to open sockets only', async () => {
    const flushes: number[] = [];
    const outbox = new Outbox<{ socket: WebSocket }>((_start, _end, sockets) => flushes.push(sockets));
    const a = fakeSocket();
    const b = fakeSocket();
    const closed = fakeSocket('closed');
    const msg = { type: 'alert_fired', n: 1 };
    outbox.send(a, msg);
    outbox.send(b, msg);
    outbox.send(closed, msg);
    outbox.send(a, { type: 'alert_resolved', n: 2 });
    expect(a.sent).toEqual([]);
    for (let i = 0; i < BATCH_MAX_TURNS + 1; i++) await turn();
    expect(a.sent).toEqual(['{"type":"alert_fired","n":1}', '{"type":"alert_resolved","n":2}']);
    expect(b.sent).toEqual(['{"type":"alert_fired","n":1}']);
    expect(closed.sent).toEqual([]);
    expect(flushes).toEqual([2]);
    // Serialised once per message object: the same object mutated afterwards is sent as first encoded.
    msg.n = 99;
    outbox.send(b, msg);
    outbox.flush();
    expect(b.sent[1]).toBe('{"type":"alert_fired","n":1}');
  });

  test(`a socket holding more than ${MAX_BUFFERED_BYTES / 1024 / 1024} MB unsent is terminated instead of written to`, () => {
    const outbox = new Outbox<{ socket: WebSocket }>();
    const [slow, fine] = [fakeSocket(), fakeSocket()];
    slow.socket.bufferedAmount = MAX_BUFFERED_BYTES + 1;
    fine.socket.bufferedAmount = MAX_BUFFERED_BYTES;
    outbox.send(slow, { n: 1 });
    outbox.send(fine, { n: 1 });
    outbox.flush();
    expect([slow.sent, slow.socket.terminated]).toEqual([[], true]);
    expect([fine.sent, fine.socket.terminated]).toEqual([['{"n":1}'], false]);
  });

  test('flush writes at once and cancels the pending turn', async () => {
    const flushes: number[] = [];
    const outbox = new Outbox<{ socket: WebSocket }>((_s, _e, sockets) => flushes.push(sockets));
    const a = fakeSocket();
    outbox.send(a, { n: 1 });
    outbox.flush();
    expect(a.sent).toEqual(['{"n":1}']);
    for (let i = 0; i < BATCH_MAX_TURNS + 1; i++) await turn();
    expect(flushes).toEqual([1]);
  });
});

describe('connections by what they follow', () => {
  const connection = (key: string) => ({ key }) as Connection;

  test('an event reaches only the connections following its run or its tenant alerts', () => {
    const all = new Connections();
    const [r1a, r1b, alerts] = [connection(runKey('t1', 'run_1')), connection(runKey('t1', 'run_1')), connection(alertsKey('t1'))];
    for (const c of [r1a, r1b, alerts]) all.add(c);
    const step = { kind: 'step_update' as const, tenantId: 't1', pipelineId: 'p', runId: 'run_1', message: {} };
    expect([...all.subscribersOf(eventKey(step))]).toEqual([r1a, r1b]);
    expect([...all.subscribersOf(eventKey({ kind: 'alert', tenantId: 't1', projectId: 'prj', message: {} }))]).toEqual([alerts]);
    expect([...all.subscribersOf(eventKey({ ...step, tenantId: 't2' }))]).toEqual([]);
    all.delete(r1a);
    all.delete(r1b);
    expect([all.size, [...all], [...all.subscribersOf(eventKey(step))]]).toEqual([1, [alerts], []]);
  });

  test('closeSocket closes an open or opening socket only', () => {
    const open = fakeSocket();
    closeSocket(open.socket, 4401, 'revoked');
    expect(open.socket.closed).toEqual([4401, 'revoked']);
    const done = fakeSocket('closed');
    closeSocket(done.socket, 1001, 'bye');
    expect(done.socket.closed).toBeUndefined();
  });
});
