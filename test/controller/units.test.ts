import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { Backoff } from '../../src/controller/backoff.js';
import { loadConfig } from '../../src/config/index.js';
import { DirectorySource, parseDuration, parseListen, redactUrl, signBody, verifySignature } from '../../src/controller/index.js';
import { withJitter } from '../../src/controller/duration.js';
import { RECENT_RUNS, renderStatusHtml, withRecentRun, type ControllerStatus, type RunRecord } from '../../src/controller/status.js';
import { relativeTime, timeTag } from '../../src/controller/status-format.js';
import { groupResources, PAGE_ROWS } from '../../src/controller/status-resources.js';
import { orderedErrors, renderStatusFragment, statusFingerprint } from '../../src/controller/status-sections.js';
import { HOSTILE, HOSTILE_ATTR, resource, richStatus } from './status-fixture.js';
import { verifyBearer } from '../../src/controller/source/webhook.js';
import { advertiseUrl, parseAdvertiseUrl } from '../../src/controller/server.js';

describe('controller building blocks', () => {
  test('durations', () => {
    expect(parseDuration('30s')).toBe(30_000);
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('5m')).toBe(300_000);
    expect(parseDuration('1h')).toBe(3_600_000);
    expect(parseDuration('2')).toBe(2_000);
    expect(() => parseDuration('5x', '--interval')).toThrow('--interval must look like 500ms, 30s, 5m or 1h; got "5x"');
    expect(() => parseDuration('0s', '--interval')).toThrow('--interval must be more than zero');
  });

  test('--listen', () => {
    expect(parseListen('127.0.0.1:9090')).toEqual({ host: '127.0.0.1', port: 9090 });
    expect(parseListen(':9090')).toEqual({ host: '0.0.0.0', port: 9090 });
    expect(parseListen('[::1]:0')).toEqual({ host: '::1', port: 0 });
    expect(() => parseListen('9090')).toThrow('--listen must be host:port');
    expect(() => parseListen('a:70000')).toThrow('--listen must be host:port');
  });

  test('--advertise-url and its defaults', () => {
    expect(parseAdvertiseUrl('http://10.0.0.5:9090/')).toBe('http://10.0.0.5:9090');
    expect(() => parseAdvertiseUrl('10.0.0.5:9090')).toThrow('--advertise-url must be an http(s) URL');
    expect(() => parseAdvertiseUrl('http://10.0.0.5:9090/hooks')).toThrow('without a path');
    // Explicit wins; then the pod IP with the listen port (IPv6 in brackets); then the listener, all-interfaces made loopback.
    expect(advertiseUrl({ explicit: 'http://ctl.internal:9090', podIp: '10.0.0.5', listenPort: 9090 })).toBe('http://ctl.internal:9090');
    expect(advertiseUrl({ podIp: '10.0.0.5', listenPort: 9090, listenerUrl: 'http://0.0.0.0:9090' })).toBe('http://10.0.0.5:9090');
    expect(advertiseUrl({ podIp: 'fd00::5', listenPort: 9090 })).toBe('http://[fd00::5]:9090');
    expect(advertiseUrl({ podIp: '10.0.0.5', listenPort: 0, listenerUrl: 'http://0.0.0.0:41234' })).toBe('http://10.0.0.5:41234');
    expect(advertiseUrl({ podIp: '10.0.0.5', listenPort: 0 })).toBeUndefined();
    expect(advertiseUrl({ listenPort: 9090, listenerUrl: 'http://0.0.0.0:9090' })).toBe('http://127.0.0.1:9090');
    expect(advertiseUrl({ listenPort: 0, listenerUrl: 'http://[::]:41234' })).toBe('http://[::1]:41234');
    expect(advertiseUrl({ listenPort: 9090, listenerUrl: 'http://127.0.0.1:9090' })).toBe('http://127.0.0.1:9090');
    expect(advertiseUrl({ listenPort: 0 })).toBeUndefined();
  });

  test('webhook signatures (GitHub test vector) and bearer tokens', () => {
    // From GitHub's documentation of X-Hub-Signature-256.
    const body = Buffer.from('Hello, World!');
    const header = 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17';
    expect(signBody("It's a Secret to Everybody", body)).toBe(header);
    expect(verifySignature("It's a Secret to Everybody", body, header)).toBe(true);
    expect(verifySignature("It's a Secret to Everybody", body, header.toUpperCase().replace('SHA256', 'sha256'))).toBe(true);
    expect(verifySignature('another', body, header)).toBe(false);
    expect(verifySignature("It's a Secret to Everybody", Buffer.from('Hello, World?'), header)).toBe(false);
    expect(verifySignature("It's a Secret to Everybody", body, undefined)).toBe(false);
    expect(verifySignature("It's a Secret to Everybody", body, 'sha1=abc')).toBe(false);
    expect(verifyBearer('s3cret', 'Bearer s3cret')).toBe(true);
    expect(verifyBearer('s3cret', 'Bearer s3cre')).toBe(false);
    expect(verifyBearer('s3cret', undefined)).toBe(false);
  });

  test('URLs are logged without credentials', () => {
    expect(redactUrl('https://user:ghp_token@github.com/acme/platform.git')).toBe('https://***@github.com/acme/platform.git');
    expect(redactUrl('https://github.com/acme/platform.git')).toBe('https://github.com/acme/platform.git');
    expect(redactUrl('/srv/git/platform.git')).toBe('/srv/git/platform.git');
  });

  test('backoff doubles per failure up to the cap, and clears on success', () => {
    let now = 1_000_000;
    const b = new Backoff({ baseMs: 1_000, maxMs: 5_000 }, () => now);
    expect(b.failed('k', 'boom')).toEqual({ failures: 1, nextAttemptAt: now + 1_000, lastError: 'boom' });
    expect(b.waiting('k')?.failures).toBe(1);
    now += 1_000;
    expect(b.waiting('k')).toBeUndefined();
    expect(b.failed('k', 'boom').nextAttemptAt).toBe(now + 2_000);
    expect(b.failed('k', 'boom').nextAttemptAt).toBe(now + 4_000);
    expect(b.failed('k', 'boom').nextAttemptAt).toBe(now + 5_000);
    b.succeeded('k');
    expect(b.get('k')).toBeUndefined();
    b.failed('a', 'x');
    b.failed('b', 'x');
    b.retain(new Set(['b']));
    expect(b.get('a')).toBeUndefined();
    expect(b.get('b')).toBeDefined();
  });

  test('a directory source: the revision hashes every file but dot entries; each revision is a snapshot that later edits do not touch', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dp-ctl-dirsrc-'));
    const snapshots = join(mkdtempSync(join(tmpdir(), 'dp-ctl-dirsnap-')), 'dir');
    mkdirSync(join(dir, 'sub'));
    writeFileSync(join(dir, 'a.yaml'), 'a: 1\n');
    writeFileSync(join(dir, 'sub', 'b.yml'), 'b: 1\n');
    const src = new DirectorySource(dir, { snapshotDir: snapshots });
    const first = await src.fetch();
    expect(first).toMatchObject({ id: expect.stringMatching(/^sha256:[0-9a-f]{16}$/), summary: '2 YAML files' });
    expect(first.root).toBe(first.configDir);
    expect(first.root.startsWith(snapshots)).toBe(true);
    expect(readFileSync(join(first.root, 'sub', 'b.yml'), 'utf8')).toBe('b: 1\n');

    mkdirSync(join(dir, '.git'));
    writeFileSync(join(dir, '.git', 'x.yaml'), 'ignored');
    expect((await src.fetch()).id).toBe(first.id);
    // A file the YAML may read (secretRef: { file: ... }, relative to the document) is part of the revision.
    writeFileSync(join(dir, 'token.txt'), 's3cret');
    const withFile = await src.fetch();
    expect(withFile.id).not.toBe(first.id);
    expect(readFileSync(join(withFile.root, 'token.txt'), 'utf8')).toBe('s3cret');

    writeFileSync(join(dir, 'sub', 'b.yml'), 'b: [broken\n');
    const edited = await src.fetch();
    expect(edited.id).not.toBe(withFile.id);
    // The earlier revision still reads as it was: that is what keeps the last good one in force.
    expect(readFileSync(join(withFile.root, 'sub', 'b.yml'), 'utf8')).toBe('b: 1\n');

    await src.cleanup([withFile.id]);
    expect(existsSync(withFile.root)).toBe(true);
    expect(existsSync(first.root)).toBe(false);
    expect(existsSync(edited.root)).toBe(false);
    await expect(new DirectorySource(join(dir, 'missing')).fetch()).rejects.toThrow('not a directory');
    // close() leaves a given snapshot directory alone...
    await src.close();
    expect(existsSync(withFile.root)).toBe(true);
  });

  test('a directory source follows links within it (git-sync), each directory once, and keeps a link out of it as a link, never read', async () => {
    const outside = mkdtempSync(join(tmpdir(), 'dp-ctl-dirsrc-outside-'));
    writeFileSync(join(outside, 'id_ed25519'), 'deploy-key-material');
    const checkout = mkdtempSync(join(tmpdir(), 'dp-ctl-dirsrc-checkout-'));
    mkdirSync(join(checkout, 'team'));
    writeFileSync(join(checkout, 'team', 'a.yaml'), 'a: 1\n');
    symlinkSync(join(checkout, 'team'), join(checkout, 'team-link')); // inside: followed
    symlinkSync(checkout, join(checkout, 'team', 'up')); // to an ancestor: ends
    symlinkSync(join(outside, 'id_ed25519'), join(checkout, 'key.txt'));
    symlinkSync('/dev/zero', join(checkout, 'zero.yaml'));
    // git-sync's layout: the source is a link to the current checkout.
    const linkDir = mkdtempSync(join(tmpdir(), 'dp-ctl-dirsrc-link-'));
    symlinkSync(checkout, join(linkDir, 'repo'));
    const rev = await new DirectorySource(join(linkDir, 'repo')).fetch();
    expect(readFileSync(join(rev.root, 'team-link', 'a.yaml'), 'utf8')).toBe('a: 1\n');
    expect(readlinkSync(join(rev.root, 'key.txt'))).toBe(join(outside, 'id_ed25519'));
    expect(readlinkSync(join(rev.root, 'zero.yaml'))).toBe('/dev/zero');
    expect(existsSync(join(rev.root, 'team', 'up'))).toBe(false);
    // The confined load reports the links out of the revision (and the YAML files are not valid config: no matter here).
    const { errors } = loadConfig('.', { cwd: rev.root, confineTo: rev.root });
    expect(errors.filter((e) => e.code === 'file_unreadable').map((e) => e.message)).toEqual([
      'is a symbolic link out of the repository (to /dev/zero): not read',
    ]);
    for (const d of [outside, checkout, linkDir]) rmSync(d, { recursive: true, force: true });
  });

  test('a directory source without a snapshot directory keeps its snapshots in a temporary directory of its own, removed by close()', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dp-ctl-dirsrc-'));
    writeFileSync(join(dir, 'a.yaml'), 'a: 1\n');
    const src = new DirectorySource(dir);
    const rev = await src.fetch();
    expect(rev.root.startsWith(tmpdir())).toBe(true);
    expect(readFileSync(join(rev.root, 'a.yaml'), 'utf8')).toBe('a: 1\n');
    await src.close();
    expect(existsSync(dirname(rev.root))).toBe(false);
    expect(existsSync(join(dir, 'a.yaml'))).toBe(true);
    // Usable again after close: a new temporary directory.
    const again = await src.fetch();
    expect(existsSync(again.root)).toBe(true);
    await src.close();
  });

  test('the interval gets up to 10% of random jitter, never less than the interval', () => {
    expect(withJitter(30_000, () => 0)).toBe(30_000);
    expect(withJitter(30_000, () => 0.5)).toBe(31_500);
    expect(withJitter(30_000, () => 0.999999)).toBe(33_000);
    const delays = Array.from({ length: 200 }, () => withJitter(10_000));
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(10_000);
    expect(Math.max(...delays)).toBeLessThanOrEqual(11_000);
    // Random, not a constant: two controllers started together do not fetch in lockstep.
    expect(new Set(delays).size).toBeGreaterThan(50);
  });

  test('the status page escapes what comes from the config, the API and git', () => {
    const hostile = '<script>alert("x")</script>';
    const status: ControllerStatus = {
      controller: {
        mode: 'apply',
        source: `git ${hostile}`,
        source_id: hostile,
        interval_ms: 30_000,
        prune: false,
        test_connections: false,
        suspended: false,
        ready: true,
        leader: { elected: true, identity: hostile, election: 'none' },
        started_at: '2026-01-01T00:00:00.000Z',
      },
      revision: {
        fetched: { id: 'abc', summary: hostile, at: '2026-01-01T00:00:00.000Z' },
        applied: { id: 'abc', summary: hostile, at: '2026-01-01T00:00:00.000Z' },
        converged: null,
        invalid: { id: 'def', summary: null, errors: [`a.yaml:1:1: ${hostile}`] },
        fetch_error: null,
        last_fetch_at: null,
      },
      last_run: null,
      runs: 0,
      recent_runs: [],
      conditions: [{ type: 'Ready', status: 'False', reason: hostile, message: hostile, last_transition_time: '2026-01-01T00:00:00.000Z' }],
      resources: [
        {
          kind: 'connector',
          yaml_kind: 'Connector',
          project: hostile,
          name: hostile,
          id: null,
          action: 'create',
          state: 'failed',
          detail: hostile,
          health: 'degraded',
          health_reason: hostile,
        },
      ],
      drift: [],
    };
    const html = renderStatusHtml(status);
    expect(html).not.toContain(hostile);
    // The page's own script is its one script element.
    expect(html.match(/<script/g)).toHaveLength(1);
    expect(html).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;');
  });

  test('... and so does every new part: groups, drift diffs, runs, errors, conditions, and the fragment pushed on /status/events', () => {
    const s = richStatus(Date.parse('2026-01-01T12:00:00Z'), true);
    for (const html of [renderStatusHtml(s), renderStatusFragment(s, Date.now())]) {
      expect(html).not.toContain(HOSTILE);
      expect(html).not.toContain(HOSTILE_ATTR);
      expect(html).not.toMatch(/<img/i);
      expect(html.match(/<script/g)?.length ?? 0).toBeLessThanOrEqual(1);
      // Group headers, drift fields and values (an object's keys too), runs' triggers and revisions.
      expect(html).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;');
      expect(html).toContain('&quot;&gt;&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;');
    }
    expect(renderStatusFragment(s, Date.now())).not.toContain('<script');
  });

  test('the status page groups resources by project (tenant-level first), problems first, with counts per state', () => {
    const now = Date.parse('2026-01-01T12:00:00Z');
    const html = renderStatusHtml(richStatus(now), now);
    const groups = [...html.matchAll(/<section class="group[^"]*" data-project="([^"]*)" data-tenant-level="(true|false)">/g)].map((m) => [
      m[1],
      m[2],
    ]);
    expect(groups).toEqual([
      ['', 'true'],
      ['analytics', 'false'],
      ['marketing', 'false'],
    ]);
    const analytics = html.slice(html.indexOf('data-project="analytics"'), html.indexOf('data-project="marketing"'));
    const names = [...analytics.matchAll(/<tr class="[^"]*" data-name="([^"]*)">/g)].map((m) => m[1]);
    // Failed and degraded before applied and in-sync.
    expect(names.slice(0, 2).sort()).toEqual(['events', 'orders-db']);
    expect(names.slice(2)).toEqual(['clicks', 'warehouse']);
    expect(analytics).toMatch(/data-state="failed" data-count="1">1 failed<.*data-state="in-sync" data-count="1">1 in-sync</s);
    // The field diff: before and after per field; sensitive values stay "(sensitive)".
    expect(html).toContain(
      '<td class="before"><pre>&quot;*/15 * * * *&quot;</pre></td><td class="after"><pre>&quot;*/5 * * * *&quot;</pre></td>',
    );
    expect(html).toMatch(/<tr class="sensitive"><td><code>spec.password<\/code><\/td><td class="before"><pre>\(sensitive\)<\/pre>/);
    // Human times with the exact time on hover; a backoff's next attempt is in the future.
    expect(html).toContain('<time datetime="2026-01-01T11:59:48.000Z" title="2026-01-01T11:59:48.000Z" data-rel>12 s ago</time>');
    expect(html).toContain(
      'next attempt <time datetime="2026-01-01T12:00:20.000Z" title="2026-01-01T12:00:20.000Z" data-rel>in 20 s</time>',
    );
    // Runs: revision, result, duration. Errors: the long list folded after five.
    expect(html).toMatch(
      /<table id="runs">.*<code title="9f8e7d6c5b4a39281706">9f8e7d6c5b4a<\/code>.*result-incomplete.*2\.3 s.*850 ms.*1 min 5 s/s,
    );
    expect(html).toContain('<details id="errors-more"><summary>7 more errors</summary>');
    // The last run's warnings, after its errors.
    const warned = renderStatusHtml({ ...richStatus(now), last_run: { ...richStatus(now).last_run!, warnings: ['Project <hr> is not pruned'] } }, now);
    expect(warned).toContain(
      `<h2>Warnings <small>of the last run's plan</small></h2><div id="warnings"><ul><li><code>Project &lt;hr&gt; is not pruned</code></li></ul>`,
    );
    expect(warned.indexOf('id="warnings"')).toBeGreaterThan(warned.indexOf('id="errors"'));
    expect(html).not.toContain('id="warnings"');
    // Without JavaScript: a meta refresh inside <noscript>, and a reload link.
    expect(html).toMatch(/<noscript><meta http-equiv="refresh" content="\d+"><\/noscript>/);
    expect(html).toContain('<a id="reload" href="">reload</a>');
    expect(html).not.toMatch(/<meta http-equiv="refresh"[^>]*>(?!<\/noscript>)/);
  });

  test('apply mode calls what the last run planned "Planned changes" (mostly config edits), drift mode calls it "Drift"', () => {
    const applyMode = richStatus();
    const driftMode = { ...applyMode, controller: { ...applyMode.controller, mode: 'drift' as const } };
    const heading = (html: string) => html.match(/<h2>([^<]*) <small>[^<]*from the config[^<]*<\/small><\/h2>/)?.[1];
    const tile = (html: string) => html.match(/<dt>([^<]*)<\/dt><dd><span id="drift-count">/)?.[1];
    const applied = renderStatusHtml(applyMode);
    expect([heading(applied), tile(applied)]).toEqual(['Planned changes', 'Planned changes']);
    expect(applied).toContain('differed from the config when the last run planned: edits of the config, or drift on the platform');
    const drifted = renderStatusHtml(driftMode);
    expect([heading(drifted), tile(drifted)]).toEqual(['Drift', 'Drift']);
  });

  test('the page is bounded: PAGE_ROWS rows, chosen problems first, the rest counted', () => {
    const many = Array.from({ length: PAGE_ROWS + 100 }, (_, i) =>
      resource({ name: `r${String(i).padStart(4, '0')}`, project: `p${i % 7}` }),
    );
    many.push(resource({ name: 'zz-broken', project: 'p6', state: 'failed', detail: 'boom' }));
    const groups = groupResources(many);
    expect(groups.reduce((n, g) => n + g.rows.length, 0)).toBe(PAGE_ROWS);
    expect(groups.find((g) => g.project === 'p6')!.rows[0].name).toBe('zz-broken');
    const s = { ...richStatus(), resources: many, drift: [] };
    const html = renderStatusHtml(s);
    expect(html.match(/<tr class="row-/g)).toHaveLength(PAGE_ROWS);
    expect(html).toContain(`<p class="more" id="resources-more">101 more in`);
    // The header counts cover every resource, shown or not.
    expect(html).toMatch(/data-project="p6"[^]*?data-state="failed" data-count="1"/);
  });

  test('errors root cause first: the invalid revision, then the fetch error, then the run; each line once', () => {
    const s = richStatus();
    const errors = orderedErrors(s);
    expect(errors[0]).toEqual({ source: 'revision 0123456789ab is invalid: not applied', line: s.revision.invalid!.errors[0] });
    expect(errors[1].line).toBe(s.revision.invalid!.errors[1]);
    expect(errors[2]).toEqual({ source: 'fetch failed', line: 'git fetch: connection reset' });
    expect(errors[3]).toEqual({
      source: 'last run: incomplete',
      line: 'Connector analytics/orders-db: failed: 422 spec.port out of range',
    });
    // The run repeats the invalid revision's first error: shown once.
    expect(errors).toHaveLength(2 + 1 + s.last_run!.errors.length - 1);
  });

  test('human times and the bounded run history', () => {
    const now = 1_000_000_000;
    expect(relativeTime(now - 12_000, now)).toBe('12 s ago');
    expect(relativeTime(now - 3 * 60_000 - 5_000, now)).toBe('3 min ago');
    expect(relativeTime(now - 2 * 3_600_000, now)).toBe('2 h ago');
    expect(relativeTime(now - 3 * 86_400_000, now)).toBe('3 d ago');
    expect(relativeTime(now + 20_000, now)).toBe('in 20 s');
    expect(timeTag(null, now)).toBe('<em>never</em>');
    expect(timeTag('not a time', now)).toBe('not a time');
    let runs: RunRecord[] = [];
    for (let i = 0; i < RECENT_RUNS + 5; i++) {
      runs = withRecentRun(runs, {
        trigger: `t${i}`,
        started_at: 'a',
        finished_at: 'b',
        duration_ms: i,
        result: 'converged',
        revision: 'r',
        summary: {},
        errors: i % 2 ? ['first', 'second'] : [],
      });
    }
    expect(runs).toHaveLength(RECENT_RUNS);
    expect(runs[0]).toMatchObject({ trigger: `t${RECENT_RUNS + 4}`, error_count: 0, first_error: null });
    expect(runs[1]).toMatchObject({ error_count: 2, first_error: 'first' });
    expect(runs[1]).not.toHaveProperty('errors');
  });

  test('the live fingerprint follows runs, suspension, leadership and conditions', () => {
    const s = richStatus();
    const fp = statusFingerprint(s);
    expect(statusFingerprint({ ...s, revision: { ...s.revision, last_fetch_at: 'later' } })).toBe(fp);
    expect(statusFingerprint({ ...s, runs: 43 })).not.toBe(fp);
    expect(statusFingerprint({ ...s, controller: { ...s.controller, suspended: true } })).not.toBe(fp);
    expect(statusFingerprint({ ...s, controller: { ...s.controller, leader: { ...s.controller.leader, elected: false } } })).not.toBe(fp);
    expect(
      statusFingerprint({ ...s, conditions: s.conditions.map((c) => (c.type === 'Reconciling' ? { ...c, status: 'True' as const } : c)) }),
    ).not.toBe(fp);
  });
});
