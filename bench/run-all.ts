/**
 * `npm run bench`: every bench, one after the other (never two at once: they would measure each
 * other), each in its own process, gathered into one Markdown table.
 *
 * Each bench appends its rows (bench/lib/report.ts) to a JSON-lines file named by BENCH_RESULTS.
 * The table, with the date, the machine and the command, is written to
 * docs/guides/benchmark-results.md and between the `bench:results` markers of the README.
 *
 * Environment (passed on to every bench):
 *   BENCH_SIZES=1000,10000     narrow the sizes (default: each bench's own, 1k/10k/100k for most)
 *   BENCH_BACKENDS=sqlite      narrow the databases (default: sqlite and postgres)
 *   BENCH_ONLY=engine,service  run only these benches; the rows of the others are kept from the last
 *                              run (docs/guides/benchmark-results.json), each with its own date
 *   BENCH_NO_WRITE=1           print the table, write no file
 * A bench that fails is reported in the table as failed, and the others still run.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { machine, machineLoad, toMarkdown, type BenchRow } from './lib/report.js';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));

/** In the order they run: the cheap ones first, so a short run still says something. */
const BENCHES = ['scheduler', 'waves', 'service', 'engine', 'controller', 'streams', 'provider'] as const;

const RESULTS_JSON = join(ROOT, 'docs', 'guides', 'benchmark-results.json');

interface StoredRow extends BenchRow {
  /** When the row was measured (YYYY-MM-DD). */
  date: string;
}

/** Rows of the benches this run did not run, from the last run that did. */
function keptRows(ran: readonly string[]): StoredRow[] {
  if (!existsSync(RESULTS_JSON)) return [];
  try {
    return (JSON.parse(readFileSync(RESULTS_JSON, 'utf8')) as StoredRow[]).filter((r) => !ran.includes(r.bench));
  } catch {
    return [];
  }
}

const README_START = '<!-- bench:results:start -->';
const README_END = '<!-- bench:results:end -->';

function runBench(name: string, resultsFile: string): Promise<{ code: number; seconds: number }> {
  const started = performance.now();
  return new Promise((resolveRun, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'bench', `${name}.ts`)], {
      cwd: ROOT,
      env: { ...process.env, BENCH_RESULTS: resultsFile },
      stdio: 'inherit',
    });
    child.once('error', reject);
    child.once('close', (code) => resolveRun({ code: code ?? 1, seconds: (performance.now() - started) / 1000 }));
  });
}

function failedRow(bench: string, why: string): BenchRow {
  return {
    bench,
    scenario: `${why} (see its output)`,
    backend: '-',
    size: 0,
    product: '-',
    baseline: '-',
    ratio: null,
    peakMb: null,
    goal: '-',
    met: false,
    load: machineLoad(),
  };
}

function readRows(file: string): BenchRow[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as BenchRow);
}

function page(rows: BenchRow[], header: string): string {
  return `${header}\n\n${toMarkdown(rows)}\n`;
}

function updateReadme(section: string) {
  const path = join(ROOT, 'README.md');
  const text = readFileSync(path, 'utf8');
  const start = text.indexOf(README_START);
  const end = text.indexOf(README_END);
  if (start < 0 || end < start) {
    console.warn(`README.md has no ${README_START} ... ${README_END} section; not updated`);
    return;
  }
  writeFileSync(path, `${text.slice(0, start + README_START.length)}\n${section}${text.slice(end)}`);
}

async function main() {
  const only = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
  const chosen = BENCHES.filter((b) => !only || only.includes(b));
  const dir = mkdtempSync(join(tmpdir(), 'dp-bench-all-'));
  const resultsFile = join(dir, 'rows.jsonl');
  const timings: string[] = [];
  const failures: BenchRow[] = [];
  try {
    for (const bench of chosen) {
      console.log(`\n=== bench:${bench} ===`);
      const before = readRows(resultsFile).length;
      const { code, seconds } = await runBench(bench, resultsFile);
      timings.push(`${bench} ${Math.round(seconds)} s`);
      // A bench that measured nothing failed too: its old rows must not pass for a new run.
      if (code !== 0) failures.push(failedRow(bench, `bench exited with ${code}`));
      else if (readRows(resultsFile).length === before) failures.push(failedRow(bench, 'bench wrote no rows'));
    }
    const date = new Date().toISOString().slice(0, 10);
    const measured: StoredRow[] = [...readRows(resultsFile), ...failures].map((r) => ({ ...r, date }));
    const kept = keptRows(chosen);
    const rows: StoredRow[] = [...measured, ...kept].sort(
      (a, b) => BENCHES.indexOf(a.bench as (typeof BENCHES)[number]) - BENCHES.indexOf(b.bench as (typeof BENCHES)[number]),
    );
    const narrowed = ['BENCH_SIZES', 'BENCH_BACKENDS', 'BENCH_ONLY'].filter((k) => process.env[k]).map((k) => `${k}=${process.env[k]}`);
    const header = [
      `Measured ${date} on ${machine()} with \`${narrowed.length ? `${narrowed.join(' ')} ` : ''}npm run bench\` (${timings.join(', ')}).`,
      ...(kept.length ? [`Rows of ${[...new Set(kept.map((r) => `${r.bench} (${r.date})`))].join(', ')} are from an earlier run.`] : []),
      'Every product figure is the real user command or API call in a fresh process (or over HTTPS to a service in its own process), alternated with its baseline (A B A B); the ratio is the median of the per-pair ratios. "load" is the 1-minute load average when the row was measured: the machine is shared. Scenarios and baselines: [benchmarks.md](benchmarks.md).',
    ].join('\n');
    const markdown = page(rows, header);
    console.log(`\n${markdown}`);
    if (!process.env.BENCH_NO_WRITE) {
      writeFileSync(join(ROOT, 'docs', 'guides', 'benchmark-results.md'), `# Benchmark results\n\n${markdown}`);
      writeFileSync(RESULTS_JSON, `${JSON.stringify(rows, null, 1)}\n`);
      updateReadme(page(rows, header.replace('[benchmarks.md](benchmarks.md)', '[docs/guides/benchmarks.md](docs/guides/benchmarks.md)')));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
