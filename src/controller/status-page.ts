import { createHash } from 'node:crypto';
import type { ControllerStatus } from './status.js';
import { esc } from './status-format.js';
import { renderStatusFragment, statusFingerprint } from './status-sections.js';

/**
 * The status page: one self-contained document (inline style and script, no external assets).
 * The server renders it whole, so it works without JavaScript; with JavaScript, a small script
 * keeps the human times current and replaces `#live` with what `/status/events` pushes.
 */

/** Seconds between reloads when JavaScript is off (`<noscript>` meta refresh). */
export const NOSCRIPT_REFRESH_S = 30;

const STYLE = `
:root{--ok:#0a7a2f;--ok-bg:#e3f5e8;--warn:#8a4b00;--warn-bg:#fff1dc;--bad:#b00020;--bad-bg:#fde7ea;--mute:#5b6470;--line:#d9dde3}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d232b;background:#f5f6f8}
header{display:flex;align-items:center;gap:1rem;padding:.7rem 1.5rem;background:#1d232b;color:#fff}
header h1{font-size:1.15rem;margin:0;font-weight:600;white-space:nowrap}header .source-info{font-size:.85rem;color:#c5ccd6}header h1 small{font-weight:400;color:#c5ccd6;margin-left:.4rem}
header .spacer{flex:1}header a{color:#c5ccd6}
.live{white-space:nowrap;font-size:.85rem;padding:.1rem .6rem;border-radius:1rem;background:#3a434f;color:#e6e9ee}
@media (scripting:none){#live-state{display:none}}
.live.on{background:#14532d;color:#d9fbe5}.live.on::before{content:"\\25CF  "}.live.off{background:#5c1a22;color:#ffe1e5}
main{padding:1rem 1.5rem 2rem;max-width:110rem}
h2{font-size:1.05rem;margin:1.6rem 0 .5rem}h2 small,h3 small{font-weight:400;color:var(--mute);margin-left:.4rem}
h3{font-size:.98rem;margin:0;padding:.45rem .7rem;display:flex;gap:.8rem;align-items:center;flex-wrap:wrap;border-bottom:1px solid var(--line)}
.overall{font-size:1.25rem;padding:.7rem 1rem;border-radius:.4rem;margin-bottom:.8rem;border-left:.5rem solid}
.overall .msg{font-size:.95rem;color:#333}
.overall.status-True{background:var(--ok-bg);border-color:var(--ok)}.overall.status-False{background:var(--bad-bg);border-color:var(--bad)}.overall.status-Unknown{background:#eceff3;border-color:var(--mute)}
.conditions{list-style:none;padding:0;margin:0 0 .8rem;display:flex;gap:.6rem;flex-wrap:wrap}
.cond{background:#fff;border:1px solid var(--line);border-radius:.4rem;padding:.35rem .7rem;max-width:40rem}
.cond .cond-status{font-weight:600}.cond .when,.when{color:var(--mute);font-size:.85rem}
.cond[data-condition=Ready].status-True .cond-status,.cond[data-condition=Stalled].status-False .cond-status,.cond[data-condition=Reconciling].status-False .cond-status{color:var(--ok)}
.cond[data-condition=Ready].status-False .cond-status,.cond[data-condition=Stalled].status-True .cond-status{color:var(--bad)}
.cond[data-condition=Reconciling].status-True .cond-status{color:var(--warn)}
.summary{display:grid;grid-template-columns:repeat(auto-fill,minmax(17rem,1fr));gap:.5rem;margin:0}
.summary div{background:#fff;border:1px solid var(--line);border-radius:.4rem;padding:.4rem .7rem}
dt{font-size:.8rem;color:var(--mute);text-transform:uppercase;letter-spacing:.03em}dd{margin:0;overflow-wrap:anywhere}
table{border-collapse:collapse;width:100%;background:#fff}td,th{border-bottom:1px solid var(--line);padding:.3rem .6rem;text-align:left;vertical-align:top}
th{font-size:.8rem;color:var(--mute);font-weight:600;background:#fafbfc}
.group{background:#fff;border:1px solid var(--line);border-radius:.4rem;margin-bottom:.8rem;overflow:hidden}
.group.has-problems{border-left:.35rem solid var(--bad)}
tr.problem{background:#fffafa}
.pill{display:inline-block;padding:0 .5rem;border-radius:1rem;font-size:.82rem;font-weight:600;background:#eceff3;color:#333;white-space:nowrap}
.state-in-sync,.state-applied,.health-healthy,.result-converged,.result-in-sync{background:var(--ok-bg);color:var(--ok)}
.state-failed,.state-backoff,.state-degraded,.health-degraded,.result-error,.result-invalid,.result-plan-error,.result-incomplete,.result-degraded{background:var(--bad-bg);color:var(--bad)}
.state-drifted,.state-progressing,.state-pending,.state-skipped,.state-unsupported,.health-progressing,.result-drift,.result-progressing,.drift-changed,.drift-deleted,.drift-orphaned,.drift-unmanaged{background:var(--warn-bg);color:var(--warn)}
.reason,.retry,.source{color:var(--mute)}
.errors #errors{background:#fff;border:1px solid #e0b4b4;border-left:.35rem solid var(--bad);border-radius:.4rem;padding:.3rem .8rem}
#errors ol{margin:.3rem 0;padding-left:1.6rem}#errors li{margin:.2rem 0}#errors code{white-space:pre-wrap;overflow-wrap:anywhere}
.warnings #warnings{background:#fff;border:1px solid var(--line);border-left:.35rem solid var(--warn);border-radius:.4rem;padding:.3rem .8rem}
#warnings ul{margin:.3rem 0;padding-left:1.2rem}#warnings li{margin:.2rem 0}#warnings code{white-space:pre-wrap;overflow-wrap:anywhere}
.source{font-size:.8rem;display:block}
.drift-entry{background:#fff;border:1px solid var(--line);border-radius:.4rem;margin-bottom:.5rem;padding:.4rem .7rem}
.drift-entry summary{cursor:pointer}
.diff{margin-top:.4rem}.diff pre{margin:0;white-space:pre-wrap;overflow-wrap:anywhere;font-size:.85rem}
.diff .before pre{color:#8c1d18}.diff .after pre{color:#0b5a26}.diff .sensitive pre{color:var(--mute);font-style:italic}
.more,.empty,.footer{color:var(--mute)}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.88em}
time{border-bottom:1px dotted #99a}
`;

/**
 * Keeps `<time data-rel>` current (the same wording as relativeTime in status-format.ts) and
 * applies what `/status/events` sends: `#live` replaced, `<details>` left open or closed as the
 * reader left them. When the stream is refused (503: too many clients) it retries every 30 s.
 */
const SCRIPT = `
(function () {
  'use strict';
  var live = document.getElementById('live');
  var badge = document.getElementById('live-state');
  // The server's clock minus this one: times are counted on the server's clock.
  var skew = Number(live.getAttribute('data-now')) - Date.now() || 0;
  function rel(ms, now) {
    var d = Math.round((now - ms) / 1000), a = Math.abs(d);
    var t = a < 60 ? a + ' s' : a < 3600 ? Math.floor(a / 60) + ' min' : a < 86400 ? Math.floor(a / 3600) + ' h' : Math.floor(a / 86400) + ' d';
    return d >= 0 ? t + ' ago' : 'in ' + t;
  }
  function tick() {
    var now = Date.now() + skew, all = document.querySelectorAll('time[data-rel]');
    for (var i = 0; i < all.length; i++) {
      var ms = Date.parse(all[i].getAttribute('datetime'));
      if (!isNaN(ms)) all[i].textContent = rel(ms, now);
    }
  }
  function show(state, text) { badge.className = 'live ' + state; badge.textContent = text; }
  tick();
  setInterval(tick, 1000);
  if (!window.EventSource) { show('off', 'not live: reload to update'); return; }
  var updates = 0;
  function apply(message) {
    var d = JSON.parse(message.data);
    if (typeof d.now === 'number') skew = d.now - Date.now();
    if (d.fp === live.getAttribute('data-fp')) return;
    var open = {}, details = live.querySelectorAll('details[id]'), i;
    for (i = 0; i < details.length; i++) open[details[i].id] = details[i].open;
    live.innerHTML = d.html;
    live.setAttribute('data-fp', d.fp);
    details = live.querySelectorAll('details[id]');
    for (i = 0; i < details.length; i++) if (details[i].id in open) details[i].open = open[details[i].id];
    live.setAttribute('data-updates', String(++updates));
    tick();
  }
  function connect() {
    var source = new EventSource(live.getAttribute('data-events'));
    source.addEventListener('status', apply);
    source.onopen = function () { show('on', 'live'); };
    source.onerror = function () {
      if (source.readyState !== 2) { show('connecting', 'reconnecting'); return; }
      show('off', 'not live: retrying in 30 s (or reload)');
      setTimeout(connect, 30000);
    };
  }
  show('connecting', 'connecting');
  connect();
})();
`;

const hash = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

/**
 * The page's Content-Security-Policy: only its own inline style and script (by hash), the
 * event stream on the same origin, nothing else. A string that slipped through escaping still
 * could not run.
 */
export const STATUS_PAGE_CSP = [
  "default-src 'none'",
  `script-src ${hash(SCRIPT)}`,
  `style-src ${hash(STYLE)}`,
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** The whole page, complete without JavaScript. */
export function renderStatusHtml(s: ControllerStatus, now = Date.now()): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<noscript><meta http-equiv="refresh" content="${NOSCRIPT_REFRESH_S}"></noscript>
<title>dpctl controller: ${esc(s.controller.source_id)}</title>
<style>${STYLE}</style></head><body>
<header><h1>dpctl controller <small>${esc(s.controller.source_id)}</small></h1>
<span class="source-info">${esc(s.controller.mode)}${s.controller.prune ? ' (prune)' : ''} every ${esc(Math.round(s.controller.interval_ms / 1000))} s from <code>${esc(s.controller.source)}</code>; ${esc(s.controller.leader.election)}: ${esc(s.controller.leader.identity)}</span>
<span class="spacer"></span><span id="live-state" class="live">static page</span><noscript><span class="live off">JavaScript is off: reloads every ${NOSCRIPT_REFRESH_S} s</span></noscript> <a id="reload" href="">reload</a></header>
<main id="live" data-fp="${statusFingerprint(s)}" data-now="${now}" data-events="status/events">
${renderStatusFragment(s, now)}
</main>
<script>${SCRIPT}</script>
</body></html>
`;
}
