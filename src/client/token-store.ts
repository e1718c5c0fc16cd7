import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';

/** A login's tokens as the client keeps them. */
export interface Tokens {
  accessToken: string;
  /** Single use: every refresh spends it and returns a new one. */
  refreshToken: string;
  /** When the access token expires (ISO 8601, from `expires_in`); informational. */
  expiresAt?: string;
  /** Whose tokens these are: `<origin> <email>`. Tokens of another subject are ignored. */
  subject?: string;
}

/**
 * Where the client keeps its tokens between runs. The refresh token rotates on every refresh
 * and a spent one presented again revokes the whole session, so `save` is called with the
 * new pair as soon as a refresh succeeds, before any request uses it.
 */
export interface TokenStore {
  load(): Promise<Tokens | undefined>;
  save(tokens: Tokens): Promise<void>;
}

/** Keeps tokens in memory only (the default: a restart logs in again). */
export class MemoryTokenStore implements TokenStore {
  private tokens: Tokens | undefined;
  constructor(initial?: Tokens) {
    this.tokens = initial ? { ...initial } : undefined;
  }
  async load() {
    return this.tokens ? { ...this.tokens } : undefined;
  }
  async save(tokens: Tokens) {
    this.tokens = { ...tokens };
  }
}

const isTokens = (v: unknown): v is Tokens =>
  !!v && typeof v === 'object' && typeof (v as Tokens).accessToken === 'string' && typeof (v as Tokens).refreshToken === 'string';

/**
 * A JSON file readable by its owner only (mode 0600, in a directory created 0700). Writes go
 * to a temporary file in the same directory, are flushed, then renamed over the old one, so a
 * crash leaves either the old pair or the new one, never a torn file. One process per file.
 */
/** A state file's text, or undefined when it does not exist yet (any other read error is thrown). */
export async function readIfPresent(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

export class FileTokenStore implements TokenStore {
  constructor(readonly path: string) {}

  async load(): Promise<Tokens | undefined> {
    const text = await readIfPresent(this.path);
    if (text === undefined) return undefined;
    try {
      const parsed = JSON.parse(text) as unknown;
      return isTokens(parsed) ? parsed : undefined;
    } catch {
      // A damaged file is as good as none: the client logs in again and overwrites it.
      return undefined;
    }
  }

  async save(tokens: Tokens): Promise<void> {
    const dir = dirname(this.path);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const tmp = `${this.path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
    const file = await open(tmp, 'wx', 0o600);
    try {
      await file.chmod(0o600); // whatever the umask
      await file.writeFile(`${JSON.stringify(tokens, null, 2)}\n`, 'utf8');
      await file.sync();
    } catch (err) {
      await file.close();
      await rm(tmp, { force: true });
      throw err;
    }
    await file.close();
    try {
      await rename(tmp, this.path);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
    await chmod(this.path, 0o600);
    // The rename itself reaches the disk with the directory.
    try {
      const d = await open(dir, 'r');
      try {
        await d.sync();
      } finally {
        await d.close();
      }
    } catch {
      // Not every platform can fsync a directory.
    }
  }
}
