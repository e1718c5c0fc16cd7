import { readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ: 100 on every Linux build we run on). */
const USER_HZ = 100;

/** CPU time (user + system) a process has used so far, in ms, as the kernel counts it. Throws when it has ended. */
export function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces): utime and stime (fields 14 and 15) are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / USER_HZ;
}

export interface ProcessUsage {
  cpuMs: number;
  rssMb: number;
  maxRssMb: number;
}

/** CPU time so far, and resident memory now and at its peak (VmRSS, VmHWM, in MB), as the kernel counts them for a process. */
export function processUsage(pid: number): ProcessUsage {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
  return { cpuMs: processCpuMs(pid), rssMb: Math.round(kb('VmRSS') / 1024), maxRssMb: Math.round(kb('VmHWM') / 1024) };
}
