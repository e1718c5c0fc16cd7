/**
 * Turns of the event loop while `work` runs: a setImmediate chain counts them. Work that holds the
 * loop throughout (a synchronous load or plan) counts none.
 */
export async function turnsDuring<T>(work: () => Promise<T>): Promise<{ result: T; turns: number }> {
  let turns = 0;
  let counting = true;
  const count = () => {
    if (!counting) return;
    turns++;
    setImmediate(count);
  };
  setImmediate(count);
  try {
    return { result: await work(), turns };
  } finally {
    counting = false;
  }
}
