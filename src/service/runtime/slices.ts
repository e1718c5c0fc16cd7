/**
 * Background work in slices. On SQLite every query resolves synchronously, so a loop of awaited
 * queries never reaches the event loop (awaiting a resolved promise only runs microtasks): 500
 * alerts fired in a row blocked every request for 450 ms. Long loops call `slice()` after each
 * item; it yields to the event loop (setImmediate, after pending I/O) once the current slice has
 * run for `budgetMs`.
 */
export const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

export const SLICE_MS = 10;

/** A pause point: undefined (nothing to await) until the slice is spent, then a turn of the event loop. */
export function slicer(budgetMs = SLICE_MS): () => Promise<void> | undefined {
  let started = performance.now();
  return () => {
    if (performance.now() - started < budgetMs) return undefined;
    return yieldToLoop().then(() => {
      started = performance.now();
    });
  };
}
