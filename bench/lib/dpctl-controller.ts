/**
 * `dpctl controller` in a child process, started as a user starts it (`node bin/dpctl.js
 * controller`, the compiled package, JSON logs), and what the benches read of it from outside:
 * its Prometheus metrics (`/metrics`, as a scraper reads them), its signed push webhook, and its
 * CPU and memory (/proc).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { DPCTL } from '../../test/support/cli.js';
import { processUsage, type ProcessUsage } from './proc.js';

export interface ControllerProcessOptions {
  /** The git repository it follows (a bare repository's path), branch main. */
  repository: string;
  /** The directory inside it that holds the YAML; its last part is the source id. */
  path: string;
  /** Time between runs, e.g. `30s`. */
  interval: string;
  stateDir: string;
  /** The webhook's HMAC secret. */
  webhookSecret: string;
  /** DATAPLATFORM_URL, _EMAIL, _PASSWORD, _CA_FILE. */
  env: NodeJS.ProcessEnv;
}

/** What one scrape of /metrics says: the revision converged, and the runs so far by result. */
export interface ControllerScrape {
  converged?: string;
  runs: Record<string, number>;
}

/** Results of a run that did what it was asked; any other ends a wait with an error. */
const GOOD_RESULTS = new Set(['converged', 'in-sync', 'incomplete']);

export function parseScrape(text: string): ControllerScrape {
  const converged = /^dpctl_controller_converged_revision_info\{revision="([^"]+)"/m.exec(text)?.[1];
  const runs: Record<string, number> = {};
  for (const m of text.matchAll(/^dpctl_controller_runs_total\{result="([^"]+)"\} (\d+)/gm)) runs[m[1]] = Number(m[2]);
  return { converged, runs };
}

const failedRuns = (s: ControllerScrape) =>
  Object.entries(s.runs)
    .filter(([result]) => !GOOD_RESULTS.has(result))
    .reduce((n, [, count]) => n + count, 0);

export const totalRuns = (s: ControllerScrape) => Object.values(s.runs).reduce((n, count) => n + count, 0);

export class DpctlController {
  private constructor(
    private readonly child: ChildProcess,
    /** The status listener, `http://127.0.0.1:<port>`. */
    readonly url: string,
    private readonly webhookSecret: string,
    readonly output: () => string,
  ) {}

  /** Starts it; resolves once its listener is up (the log line that names its URL). */
  static async start(o: ControllerProcessOptions): Promise<DpctlController> {
    const args = [DPCTL, 'controller', '--source', o.repository, '--branch', 'main', '--path', o.path, '--interval', o.interval];
    args.push('--listen', '127.0.0.1:0', '--state-dir', o.stateDir, '--log-format', 'json', '--log-level', 'info');
    const child = spawn(process.execPath, args, {
      env: { ...process.env, ...o.env, DPCTL_WEBHOOK_SECRET: o.webhookSecret },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`dpctl controller did not start listening:\n${out.slice(-3000)}`)), 30_000);
      const check = () => {
        const m = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(out);
        if (!m) return;
        clearTimeout(timer);
        child.off('close', early);
        resolve(m[1]);
      };
      const early = (code: number | null) => {
        clearTimeout(timer);
        reject(new Error(`dpctl controller exited with ${code}:\n${out.slice(-3000)}`));
      };
      child.stdout!.on('data', check);
      child.stderr!.on('data', check);
      child.once('close', early);
    });
    return new DpctlController(child, url, o.webhookSecret, () => out);
  }

  usage(): ProcessUsage {
    return processUsage(this.child.pid!);
  }

  /**
   * Its metrics. A request that meets a connection closed under it (ECONNRESET: the listener's
   * keep-alive timer fires late after a long turn of its event loop) is sent again, twice at most.
   */
  async scrape(attempts = 3): Promise<ControllerScrape> {
    let res: Response;
    try {
      res = await fetch(`${this.url}/metrics`);
    } catch (err) {
      // A process that died (out of memory, a crash) says why in its output.
      const ended = this.child.exitCode ?? this.child.signalCode;
      if (ended === null && attempts > 1) return this.scrape(attempts - 1);
      throw new Error(
        `/metrics: ${(err as Error).message}${ended === null ? '' : `; dpctl controller exited (${ended})`}:\n${this.output().slice(-3000)}`,
        { cause: err },
      );
    }
    if (!res.ok) throw new Error(`/metrics answered ${res.status}`);
    return parseScrape(await res.text());
  }

  /** The status (`/status.json`): large with many resources, so read once a measurement is over. */
  async status(): Promise<{ recent_runs: Array<{ revision: string | null; result: string; duration_ms: number }> }> {
    return (await fetch(`${this.url}/status.json`)).json() as never;
  }

  /** Sends the signed push webhook for `commit` on main, as a git host does. */
  async notifyPush(commit: string): Promise<void> {
    const { signBody } = await import('../../src/controller/index.js');
    const body = JSON.stringify({ ref: 'refs/heads/main', after: commit });
    const res = await fetch(`${this.url}/hooks/git`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json', 'x-github-event': 'push', 'x-hub-signature-256': signBody(this.webhookSecret, body) },
    });
    if (res.status !== 202) throw new Error(`webhook answered ${res.status}: ${await res.text()}`);
  }

  /**
   * Waits until a run has converged on `commit` (its metrics name it), scraping every `pollMs`;
   * fails as soon as a run ends with an error result, or at `timeoutMs`.
   */
  async waitForConverged(commit: string, timeoutMs: number, pollMs = 20): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const failedBefore = failedRuns(await this.scrape());
    for (;;) {
      const scrape = await this.scrape();
      if (scrape.converged === commit) return;
      if (failedRuns(scrape) > failedBefore)
        throw new Error(`a run failed waiting for ${commit.slice(0, 8)} (${JSON.stringify(scrape.runs)}):\n${this.output().slice(-3000)}`);
      if (Date.now() > deadline)
        throw new Error(
          `${commit.slice(0, 8)} did not converge within ${timeoutMs} ms (${JSON.stringify(scrape.runs)}):\n${this.output().slice(-3000)}`,
        );
      await sleep(pollMs);
    }
  }

  /** SIGTERM, as a process manager stops it; resolves when it has exited. */
  stop(): Promise<void> {
    return new Promise((resolve) => {
      if (this.child.exitCode !== null) return resolve();
      this.child.once('close', () => resolve());
      this.child.kill('SIGTERM');
    });
  }
}
