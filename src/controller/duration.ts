/** Parses `500ms`, `30s`, `5m`, `1h` (or a bare number of seconds) into milliseconds. */
export function parseDuration(text: string, name = 'duration'): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(text);
  if (!m) throw new Error(`${name} must look like 500ms, 30s, 5m or 1h; got ${JSON.stringify(text)}`);
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }[(m[2] ?? 's') as 'ms' | 's' | 'm' | 'h'];
  const ms = Math.round(Number(m[1]) * unit);
  if (ms <= 0) throw new Error(`${name} must be more than zero; got ${JSON.stringify(text)}`);
  return ms;
}

/** The delay until the next run: the interval plus up to 10% random jitter, so replicas and controllers of many teams do not fetch in lockstep. */
export const withJitter = (ms: number, random = Math.random) => Math.round(ms * (1 + 0.1 * random()));
