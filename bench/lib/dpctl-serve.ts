/**
 * `dpctl serve` in a child process, started as a user starts it (test/support/cli.ts startServe:
 * `node bin/dpctl.js serve`), and what the benches read of it from outside: its CPU time and
 * memory (from /proc, as `top` does).
 */
import { join } from 'node:path';
import { startServe, type RunningCli } from '../../test/support/cli.js';
import { processUsage, type ProcessUsage } from './proc.js';

export interface ServeOptions {
  dataDir: string;
  databaseUrl?: string;
  /** Extra flags (e.g. `--rate-limit`). */
  flags?: string[];
  env?: Record<string, string>;
  /** Also wait for this text in the output (e.g. the bootstrap tenant's line). */
  readyText?: string;
}

/** Resolves once the process has printed `text` (on either stream). */
function printed(cli: RunningCli, text: string): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (!(cli.stdout() + cli.stderr()).includes(text)) return;
      cli.child.stdout!.off('data', check);
      cli.child.stderr!.off('data', check);
      resolve();
    };
    cli.child.stdout!.on('data', check);
    cli.child.stderr!.on('data', check);
    check();
  });
}

export class DpctlServe {
  private constructor(
    private readonly cli: RunningCli,
    /** The CA of the generated certificate (`<data dir>/tls/ca.pem`). */
    readonly caPath: string,
  ) {}

  get port(): number {
    return this.cli.port;
  }

  /** Starts it; resolves once it listens (and `readyText` was printed). */
  static async start(o: ServeOptions): Promise<DpctlServe> {
    const flags = ['--data-dir', o.dataDir, '--log-level', 'silent', ...(o.flags ?? [])];
    if (o.databaseUrl) flags.push('--database-url', o.databaseUrl);
    const cli = await startServe(flags, o.env);
    if (o.readyText) await printed(cli, o.readyText);
    return new DpctlServe(cli, join(o.dataDir, 'tls', 'ca.pem'));
  }

  /** CPU time so far and memory now and at peak, as the kernel counts them for the process. */
  usage(): ProcessUsage {
    return processUsage(this.cli.child.pid!);
  }

  /**
   * SIGSTOP / SIGCONT: the process (its timers, its scheduler) stands still, so a baseline measured
   * meanwhile on the same machine is not slowed by it (bench/waves.ts).
   */
  pause(): void {
    process.kill(this.cli.child.pid!, 'SIGSTOP');
  }

  resume(): void {
    process.kill(this.cli.child.pid!, 'SIGCONT');
  }

  /** SIGTERM, as a process manager stops it; resolves when it has exited. */
  async stop(): Promise<void> {
    await this.cli.stop('SIGTERM');
  }
}
