import { streamedDuration, type RunData, type StepResult } from '../runtime/runs.js';

/** What a step's state so far looks like as messages: a subscriber that connects late catches up. */
export function snapshot(run: RunData): Record<string, unknown>[] {
  const out: { at: string; order: number; msg: Record<string, unknown> }[] = [];
  run.steps.forEach((s: StepResult, i) => {
    const msg = (status: string, duration: number | null, at: string) => ({
      at,
      order: i * 2 + (status === 'running' ? 0 : 1),
      msg: {
        type: 'step_update',
        step_id: s.step_id,
        step_name: s.step_name,
        status,
        duration_seconds: streamedDuration(duration),
        timestamp: at,
      },
    });
    if (s.started_at) out.push(msg('running', 0, s.started_at));
    if (s.status !== 'pending' && s.status !== 'running')
      out.push(msg(s.status, s.duration_seconds, s.finished_at ?? s.started_at ?? run.finished_at ?? run.started_at));
  });
  return out.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.order - b.order)).map((e) => e.msg);
}

/**
 * The step updates one run stream writes: first the catch-up (the stored run, then what was
 * announced and not stored yet), with live updates held until it is written; then live updates
 * as they come. The catch-up and live updates may overlap: each (step, status) is written once.
 */
export class RunDelivery {
  private readonly sent = new Set<string>();
  private held: Record<string, unknown>[] | undefined = [];

  constructor(private readonly write: (msg: Record<string, unknown>) => void) {}

  /** A live update: held while the catch-up is being read, written at once after it. */
  live(msg: Record<string, unknown>): void {
    if (this.held) this.held.push(msg);
    else this.deliver(msg);
  }

  /** Writes catch-up messages (those of a (step, status) already written are skipped). */
  catchUp(messages: Iterable<Record<string, unknown>>): void {
    for (const msg of messages) this.deliver(msg);
  }

  /** The catch-up is read: writes `announced`, then the held live updates; later ones go out at once. */
  goLive(announced: Iterable<Record<string, unknown>>): void {
    this.catchUp(announced);
    this.catchUp(this.held ?? []);
    this.held = undefined;
  }

  private deliver(msg: Record<string, unknown>): void {
    const key = `${msg.step_id}\u0000${msg.status}`;
    if (this.sent.has(key)) return;
    this.sent.add(key);
    this.write(msg);
  }
}
