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
