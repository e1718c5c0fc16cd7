/**
 * `dpctl serve` in a child process, started as a user starts it (`node bin/dpctl.js serve`), and
 * what the benches read of it from outside: its CPU time and memory (from /proc, as `top` does).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const DPCTL = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'dpctl.js');
/** Clock ticks per second of /proc/<pid>/stat (USER_HZ: 100 on every Linux build we run on). */
const USER_HZ = 100;

export interface ServeOptions {
  dataDir: string;
  databaseUrl?: string;
  /** Extra flags (e.g. `--rate-limit`). */
  flags?: string[];
  env?: NodeJS.ProcessEnv;
  /** Also wait for this text in the output (e.g. the bootstrap tenant's line). */
  readyText?: string;
}

export interface ProcessUsage {
  cpuMs: number;
  rssMb: number;
  maxRssMb: number;
}

export class DpctlServe {
  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
    /** The CA of the generated certificate (`<data dir>/tls/ca.pem`). */
    readonly caPath: string,
  ) {}

  /** Starts it; resolves once it listens (and `readyText` was printed). */
  static async start(o: ServeOptions): Promise<DpctlServe> {
    const args = [DPCTL, 'serve', '--port', '0', '--data-dir', o.dataDir, '--log-level', 'silent', ...(o.flags ?? [])];
    if (o.databaseUrl) args.push('--database-url', o.databaseUrl);
    const child = spawn(process.execPath, args, { env: { ...process.env, ...o.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const port = await new Promise<number>((resolve, reject) => {
      const onData = (d: Buffer) => {
        output += d.toString();
        const m = /listening on https:\/\/[^:]+:(\d+)/.exec(output);
        if (m && (!o.readyText || output.includes(o.readyText))) resolve(Number(m[1]));
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('exit', (code) => reject(new Error(`dpctl serve exited (${code}) before it was ready:\n${output}`)));
    });
    return new DpctlServe(child, port, join(o.dataDir, 'tls', 'ca.pem'));
  }

  /** CPU time so far and memory now and at peak, as the kernel counts them for the process. */
  usage(): ProcessUsage {
    const pid = this.child.pid!;
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const cpuMs = ((Number(fields[11]) + Number(fields[12])) * 1000) / USER_HZ;
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
    return { cpuMs, rssMb: Math.round(kb('VmRSS') / 1024), maxRssMb: Math.round(kb('VmHWM') / 1024) };
  }

  /** SIGTERM, as a process manager stops it; resolves when it has exited. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGTERM');
    await exited;
  }
}
