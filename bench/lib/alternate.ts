/**
 * Times whole commands the way a user runs them: each run is a fresh process, started and
 * reaped from here, and two commands (the product A and its baseline B) run in turn,
 * A B A B ..., so a machine that slows down mid-run slows both. The ratio is taken pair by
 * pair and its median reported: one slow pair cannot move it.
 *
 * Peak memory is the kernel's accounting of the finished child (GNU time's %M, the largest
 * resident set of the process it waited for), read when /usr/bin/time exists; otherwise it is
 * left out (null) rather than guessed.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Command {
  /** What the table calls it. */
  name: string;
  cmd: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Exit codes that count as success (default [0]; `dpctl plan --detailed-exitcode` uses 2). */
  okCodes?: number[];
}

export interface Run {
  wallMs: number;
  /** Peak resident set in MB, or null where it cannot be measured. */
  peakMb: number | null;
}

export interface Summary {
  runs: Run[];
  medianMs: number;
  minMs: number;
  maxMs: number;
  medianPeakMb: number | null;
}

export interface Alternated {
  a: Summary;
  b: Summary;
  /** Median of the per-pair ratios A/B (wall time). */
  ratio: number;
}

const GNU_TIME = '/usr/bin/time';
const hasGnuTime = existsSync(GNU_TIME);

export const median = (xs: number[]): number => {
  const s = [...xs].sort((x, y) => x - y);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
};

/** One run of a command as a fresh process. Throws with its output when it fails. */
export async function runOnce(command: Command): Promise<Run> {
  const dir = mkdtempSync(join(tmpdir(), 'dp-bench-time-'));
  const timeFile = join(dir, 'time');
  const [cmd, args] = hasGnuTime ? [GNU_TIME, ['-f', '%M', '-o', timeFile, command.cmd, ...command.args]] : [command.cmd, command.args];
  try {
    const started = performance.now();
    const { code, output } = await new Promise<{ code: number; output: string }>((resolve, reject) => {
      const child = spawn(cmd, args, { cwd: command.cwd, env: { ...process.env, ...command.env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      const keep = (d: Buffer) => {
        if (output.length < 20_000) output += d.toString();
      };
      child.stdout.on('data', keep);
      child.stderr.on('data', keep);
      child.once('error', reject);
      child.once('close', (c) => resolve({ code: c ?? 1, output }));
    });
    const wallMs = performance.now() - started;
    if (!(command.okCodes ?? [0]).includes(code)) throw new Error(`${command.name} exited with ${code}:\n${output.slice(-4000)}`);
    const kb = hasGnuTime ? Number(readFileSync(timeFile, 'utf8').trim().split('\n').pop()) : NaN;
    return { wallMs, peakMb: Number.isFinite(kb) ? Math.round(kb / 1024) : null };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function summarize(runs: Run[]): Summary {
  const walls = runs.map((r) => r.wallMs);
  const peaks = runs.map((r) => r.peakMb).filter((p): p is number => p !== null);
  return {
    runs,
    medianMs: median(walls),
    minMs: Math.min(...walls),
    maxMs: Math.max(...walls),
    medianPeakMb: peaks.length ? median(peaks) : null,
  };
}

/** Runs A and B in turn, `runs` times each, after `warmup` unmeasured pairs. */
export async function alternate(a: Command, b: Command, options: { runs?: number; warmup?: number } = {}): Promise<Alternated> {
  const runs = options.runs ?? 5;
  for (let i = 0; i < (options.warmup ?? 1); i++) {
    await runOnce(a);
    await runOnce(b);
  }
  const as: Run[] = [];
  const bs: Run[] = [];
  for (let i = 0; i < runs; i++) {
    as.push(await runOnce(a));
    bs.push(await runOnce(b));
  }
  return { a: summarize(as), b: summarize(bs), ratio: median(as.map((r, i) => r.wallMs / bs[i].wallMs)) };
}

/** Runs one command `runs` times (no baseline). */
export async function repeat(command: Command, options: { runs?: number; warmup?: number } = {}): Promise<Summary> {
  for (let i = 0; i < (options.warmup ?? 1); i++) await runOnce(command);
  const out: Run[] = [];
  for (let i = 0; i < (options.runs ?? 5); i++) out.push(await runOnce(command));
  return summarize(out);
}
