/** `--smtp-url` checks, apart from the SMTP sender so the CLI can parse options without loading it. */

/** `url` when it is an smtp:// or smtps:// URL with a host; otherwise an error naming `source` (never echoing a password). */
export function checkSmtpUrl(url: string, source: string): string {
  const example = 'smtp://user:password@host:587 or smtps://host:465';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`${source} is not a URL: give ${example}`);
  }
  if (parsed.protocol !== 'smtp:' && parsed.protocol !== 'smtps:')
    throw new Error(`${source} must start with smtp:// or smtps://, got ${parsed.protocol}//: give ${example}`);
  if (!parsed.hostname) throw new Error(`${source} has no host: give ${example}`);
  return url;
}

/** The URL as it may be shown: without its password. */
export function redactedSmtpUrl(url: string): string {
  const parsed = new URL(url);
  if (parsed.password) parsed.password = '***';
  return parsed.toString();
}
