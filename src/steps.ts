/**
 * Long synchronous work (loading 100,000 YAML documents, planning them) written once, as a
 * generator that yields between its steps, and run two ways: at once (runSteps), for a command that
 * does nothing else meanwhile, or in turns (runStepsInTurns), for a process that must keep answering
 * (the controller: /healthz, /metrics, webhooks). In one go, a first load of 101,000 documents held
 * the controller's event loop for 13.8 s.
 */
export type Steps<T> = Generator<void, T, void>;

/** Runs one step; a load wraps each of its steps in its own state (load.ts). */
export type StepRunner = <R>(step: () => R) => R;

const direct: StepRunner = (step) => step();

/** Items (documents) a generator handles between two of its steps. */
export const ITEMS_PER_STEP = 500;

/** How long work in turns runs before it lets the event loop turn. */
export const TURN_MS = 10;

/** Runs every step at once. */
export function runSteps<T>(steps: Steps<T>, run: StepRunner = direct): T {
  for (;;) {
    const step = run(() => steps.next());
    if (step.done) return step.value;
  }
}

/**
 * A turn of the event loop (after pending I/O), for a process that must keep answering: between
 * phases that each take a while at 100,000 resources (a plan's drift report, a run's status rows).
 */
export const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Runs the steps with a turn of the event loop (after pending I/O) whenever TURN_MS have passed. */
export async function runStepsInTurns<T>(steps: Steps<T>, run: StepRunner = direct): Promise<T> {
  let turnStarted = performance.now();
  for (;;) {
    const step = run(() => steps.next());
    if (step.done) return step.value;
    if (performance.now() - turnStarted < TURN_MS) continue;
    await nextTurn();
    turnStarted = performance.now();
  }
}
