import { sep } from 'node:path';

/** True when `real` (a real path) is `root` (a real path) or under it: a prefix match would take /repo-evil for /repo. */
export const isWithin = (root: string, real: string): boolean => real === root || real.startsWith(root.endsWith(sep) ? root : root + sep);
