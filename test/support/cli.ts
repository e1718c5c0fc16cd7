import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

export const DPCTL = join(import.meta.dirname, '..', '..', 'bin', 'dpctl.js');

export interface RunningCli {
  child: ChildProcess;
  port: number;
  stderr: () => string;
  stdout: () => string;
  /** Sends a signal and waits for the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `dpctl serve` (the built binary, as users run it) and waits until it says where it listens. */
export async function startServe(args: string[], env: Record<string, string> = {}): Promise<RunningCli> {
  const child = spawn(process.execPath, [DPCTL, 'serve', '--port', '0', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`dpctl serve did not start:\n${err}`)), 20_000);
    const check = () => {
      const m = err.match(/listening on https:\/\/[^:]+:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    child.stderr!.on('data', check);
    child.once('close', (code) => {
      clearTimeout(timer);
      reject(new Error(`dpctl serve exited with ${code}:\n${err}`));
    });
  });
  return {
    child,
    port,
    stderr: () => err,
    stdout: () => out,
    stop: (signal = 'SIGTERM') =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve(child.exitCode);
        // After 'close' the last output lines are in stderr() / stdout() too.
        child.once('close', (code) => resolve(code));
        child.kill(signal);
      }),
  };
}

/** Runs a dpctl command to completion. */
export function runDpctl(
  args: string[],
  options: { env?: Record<string, string>; input?: string; cwd?: string } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [DPCTL, ...args], {
      cwd: options.cwd,
      env: { ...process.env, ...(options.env ?? {}) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.stdin.end(options.input ?? '');
    // 'close', not 'exit': the output pipes may still hold data when the process has exited.
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}
