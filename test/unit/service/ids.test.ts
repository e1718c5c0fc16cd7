import { describe, expect, it } from 'vitest';
import { newRequestId } from '../../../src/service/ids.js';

describe('request ids', () => {
  it('are req_ and 16 URL-safe characters, all different', () => {
    const ids = Array.from({ length: 20_000 }, () => newRequestId());
    for (const id of ids.slice(0, 100)) expect(id).toMatch(/^req_[A-Za-z0-9_-]{16}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('differ between processes: the prefix is random per process', async () => {
    const { execFileSync } = await import('node:child_process');
    const script = "import('./src/service/ids.ts').then((m) => console.log(m.newRequestId()))";
    const first = () => execFileSync(process.execPath, ['--import', 'tsx', '-e', script], { encoding: 'utf8' }).trim();
    const [a, b] = [first(), first()];
    expect(a).toMatch(/^req_/);
    expect(a.slice(0, 12)).not.toBe(b.slice(0, 12));
  });
});
