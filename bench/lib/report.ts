/**
 * One row format for every bench, so `npm run bench` can gather them into one table.
 * Each bench prints its own rows as a Markdown table and, when BENCH_RESULTS names a file,
 * appends them there as JSON lines (bench/run-all.ts reads that file).
 */
import { appendFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';

export interface BenchRow {
  /** Which bench (engine, service, streams, provider, scheduler...). */
  bench: string;
  /** What was measured, as a user would say it ("dpctl plan, no changes"). */
  scenario: string;
  /** sqlite, postgres, or '-' where no database is involved. */
  backend: string;
  /** Resources involved (0 where it does not apply). */
  size: number;
  /** The product's median, with its unit ("1.82 s", "4,210 req/s", "p99 31 ms"). */
  product: string;
  /** The baseline's median and what it is ("bare YAML parse 1.60 s"), or '-'. */
  baseline: string;
  /** Product / baseline (or baseline-relative figure the goal is stated in), or null. */
  ratio: number | null;
  /** Peak memory of the product in MB, or null. */
  peakMb: number | null;
  /** The goal as stated in the issue or docs ("< 2 s, <= 1.3x"), or '-'. */
  goal: string;
  /** Whether the goal is met; null when there is no goal. */
  met: boolean | null;
  /** 1-minute load average when the row was measured (the machine is shared). */
  load: number;
}

/** A row that only reports a figure: no baseline, ratio, memory or goal. */
export const figureRow = (r: Pick<BenchRow, 'bench' | 'scenario' | 'backend' | 'size' | 'product' | 'load'>): BenchRow => ({
  ...r,
  baseline: '-',
  ratio: null,
  peakMb: null,
  goal: '-',
  met: null,
});

export const machineLoad = (): number => Math.round(loadavg()[0] * 100) / 100;

export const machine = (): string =>
  `${cpus().length} cores (${cpus()[0]?.model.trim() ?? 'unknown'}), ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}`;

export const seconds = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;

export function toMarkdown(rows: BenchRow[]): string {
  const header = ['bench', 'scenario', 'db', 'resources', 'product', 'baseline', 'ratio', 'peak MB', 'goal', 'met', 'load'];
  const cells = rows.map((r) => [
    r.bench,
    r.scenario,
    r.backend,
    r.size ? r.size.toLocaleString('en-US') : '-',
    r.product,
    r.baseline,
    r.ratio === null ? '-' : `${r.ratio.toFixed(2)}x`,
    r.peakMb === null ? '-' : String(r.peakMb),
    r.goal,
    r.met === null ? '-' : r.met ? 'yes' : '**no**',
    r.load.toFixed(2),
  ]);
  const line = (c: string[]) => `| ${c.map((x) => x.replace(/\|/g, '\\|')).join(' | ')} |`;
  return [line(header), `|${header.map(() => '---').join('|')}|`, ...cells.map(line)].join('\n');
}

/** Prints the rows and hands them to `npm run bench` when it is the caller. */
export function report(rows: BenchRow[]): void {
  console.log(toMarkdown(rows));
  const file = process.env.BENCH_RESULTS;
  if (file) appendFileSync(file, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
}

/** BENCH_SIZES=1000,10000 narrows the sizes a bench covers (default: all of 1k, 10k, 100k). */
export function benchSizes(defaults: number[] = [1_000, 10_000, 100_000]): number[] {
  const raw = process.env.BENCH_SIZES;
  if (!raw) return defaults;
  return raw
    .split(',')
    .map((s) => Number(s.trim()))
    .filter((n) => Number.isInteger(n) && n > 0);
}

/** BENCH_BACKENDS=sqlite narrows the databases (default both). */
export function benchBackends(): Array<'sqlite' | 'postgres'> {
  const raw = process.env.BENCH_BACKENDS;
  const all: Array<'sqlite' | 'postgres'> = ['sqlite', 'postgres'];
  return raw
    ? all.filter((b) =>
        raw
          .split(',')
          .map((s) => s.trim())
          .includes(b),
      )
    : all;
}
