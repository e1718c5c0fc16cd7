import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FileTokenStore, MemoryTokenStore, type Tokens } from '../../../src/client/index.js';

const dir = mkdtempSync(join(tmpdir(), 'dp-token-store-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const pair = (n: number): Tokens => ({ accessToken: `dpat_${n}`, refreshToken: `dprt_${n}`, subject: 'https://a.localhost:1 a@b.c' });

describe('FileTokenStore', () => {
  it('loads nothing before the first save; saves owner-only; overwrites atomically', async () => {
    const path = join(dir, 'a', 'b', 'tokens.json');
    const store = new FileTokenStore(path);
    expect(await store.load()).toBeUndefined();
    await store.save(pair(1));
    expect(await store.load()).toEqual(pair(1));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'a', 'b')).mode & 0o777).toBe(0o700);
    await store.save(pair(2));
    expect(await new FileTokenStore(path).load()).toEqual(pair(2));
    expect(readdirSync(join(dir, 'a', 'b'))).toEqual(['tokens.json']);
  });

  it('keeps 0600 even when the old file was world-readable', async () => {
    const path = join(dir, 'loose.json');
    writeFileSync(path, JSON.stringify(pair(0)), { mode: 0o644 });
    await new FileTokenStore(path).save(pair(3));
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('concurrent saves leave one whole pair and no temporary files', async () => {
    const path = join(dir, 'race.json');
    const store = new FileTokenStore(path);
    await Promise.all(Array.from({ length: 20 }, (_, i) => store.save(pair(i))));
    const loaded = await store.load();
    expect(loaded).toEqual(pair(Number(loaded!.accessToken.split('_')[1])));
    expect(readdirSync(dir).filter((f) => f.startsWith('race.json'))).toEqual(['race.json']);
  });

  it('a damaged file reads as no tokens (the client logs in and overwrites it)', async () => {
    const path = join(dir, 'damaged.json');
    writeFileSync(path, '{"accessToken": "dpat_');
    expect(await new FileTokenStore(path).load()).toBeUndefined();
    writeFileSync(path, '{"something": "else"}');
    expect(await new FileTokenStore(path).load()).toBeUndefined();
  });
});

describe('MemoryTokenStore', () => {
  it('returns copies', async () => {
    const store = new MemoryTokenStore(pair(1));
    const loaded = (await store.load())!;
    loaded.accessToken = 'changed';
    expect((await store.load())!.accessToken).toBe('dpat_1');
  });
});
