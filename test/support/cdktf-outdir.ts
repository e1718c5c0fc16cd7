import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

/**
 * An outdir for the file's `Testing.app({ outdir })` calls, removed after the file: without one,
 * each `Testing.app()` makes a `cdktf.outdir.*` directory in the system's temp directory and leaves
 * it there (440 of them after a day of test runs on this machine).
 */
export function testOutdir(): string {
  const outdir = mkdtempSync(join(tmpdir(), 'dp-cdktf-test-'));
  afterAll(() => rmSync(outdir, { recursive: true, force: true }));
  return outdir;
}
