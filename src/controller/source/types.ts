/** One version of the configuration, checked out on local disk. */
export interface Revision {
  /** Commit id (git) or content hash (directory). */
  id: string;
  /** The directory to load the YAML from (the checkout plus `--path`). */
  configDir: string;
  /** Root of the checkout: error locations are shown relative to it. */
  root: string;
  /** One line about the revision for status and logs (commit subject, or the directory). */
  summary?: string;
}

/** Where the configuration comes from: a git branch or a plain directory. */
export interface ConfigSource {
  /** For status and logs; never holds credentials. */
  readonly description: string;
  /** Fetches the newest revision (network for git) and makes it available on disk. */
  fetch(signal?: AbortSignal): Promise<Revision>;
  /** Frees on-disk copies that no longer matter; `keep` are revision ids still in use. */
  cleanup?(keep: string[]): Promise<void>;
  /** Frees what the source made for itself (a private temporary directory); the controller calls it on stop. */
  close?(): Promise<void>;
}

/** `https://user:token@host/x.git` -> `https://***@host/x.git`, so a URL can be logged. */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/@\s]+@/i, '$1***@');
}
