import { closeSync, constants, fstatSync, openSync, readFileSync } from 'node:fs';

/** The most a secret file may hold: a secret is a password, a token or a key, never a large file. */
export const SECRET_FILE_MAX_BYTES = 1024 * 1024;

/**
 * A secret file's text: a regular file of at most SECRET_FILE_MAX_BYTES (a secretRef to
 * /dev/zero or to a named pipe would otherwise read forever or wait forever).
 */
export function readSecretFile(path: string): string {
  // Non-blocking: opening a named pipe to read would otherwise wait for a writer, event loop and all.
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const stat = fstatSync(fd);
    if (stat.isDirectory()) throw Object.assign(new Error('it is a directory'), { code: 'EISDIR' });
    if (!stat.isFile()) throw new Error('it is not a regular file');
    if (stat.size > SECRET_FILE_MAX_BYTES)
      throw new Error(`it holds ${stat.size} bytes; a secret file holds at most ${SECRET_FILE_MAX_BYTES}`);
    return readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
}
