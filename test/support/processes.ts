import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';

/**
 * Live (not zombie) processes of a process group, with their command lines. /proc on Linux; elsewhere
 * kill(-pgid, 0) only says whether the group has any member left.
 */
export function groupMembers(pgid: number): string[] {
  try {
    process.kill(-pgid, 0);
  } catch {
    return [];
  }
  if (!existsSync('/proc/self/stat')) return [`(process group ${pgid} is not empty)`];
  const members: string[] = [];
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // Fields after the command name "(...)": state, ppid, pgrp.
      const [state, ppid, pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(pgrp) !== pgid || state === 'Z') continue;
      members.push(`${pid} (parent ${ppid}): ${readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim()}`);
    } catch {
      // Exited while being read.
    }
  }
  return members;
}

/** Waits up to `ms` for a process group to have no live member; returns those still running then. */
export async function groupLeftAfter(pgid: number, ms: number): Promise<string[]> {
  const deadline = Date.now() + ms;
  let left = groupMembers(pgid);
  while (left.length && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    left = groupMembers(pgid);
  }
  return left;
}

/**
 * `command` in a process group of its own (as a shell starts a foreground job, so a signal to the
 * group reaches only its tree), stdout and stderr collected.
 */
export function spawnInGroup(command: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }) {
  const child = spawn(command, args, { ...options, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  return { child, pid: child.pid!, stdout: () => stdout, stderr: () => stderr, output: () => stdout + stderr };
}
