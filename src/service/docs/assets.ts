/**
 * The static files that make /api/docs the product's page rather than Swagger UI's demo:
 * a mark (favicon and header), the header's CSS and a small sign-in script.
 *
 * They are strings in a module, not files next to it, because the build (tsc) copies only
 * compiled TypeScript into dist/. The script is plain ES2020 without dependencies, served by
 * @fastify/swagger-ui's theme routes from the same origin (application/javascript), so it also
 * passes a `script-src 'self'` Content-Security-Policy: no inline script, no eval.
 */

/** Fired by the uiConfig.onComplete in docs.ts with the Swagger UI instance as `detail`. */
export const UI_READY_EVENT = 'dataplatform:swagger-ui-ready';

/** Three stacked disks (a data store) on the product's dark blue. */
export const PRODUCT_MARK_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32" width="32" height="32" aria-hidden="true">' +
  '<rect width="32" height="32" rx="7" fill="#1d3a56"/>' +
  '<g fill="none" stroke="#6fd3a8" stroke-width="2.4" stroke-linecap="round">' +
  '<ellipse cx="16" cy="9.5" rx="8" ry="3.2"/>' +
  '<path d="M8 9.5v13c0 1.8 3.6 3.2 8 3.2s8-1.4 8-3.2v-13M8 16c0 1.8 3.6 3.2 8 3.2s8-1.4 8-3.2"/>' +
  '</g></svg>';

export const DOCS_CSS = `
#dp-docs-header { background: #1d3a56; color: #fff; font-family: sans-serif; }
#dp-docs-header .dp-bar { box-sizing: border-box; max-width: 1460px; margin: 0 auto; padding: 12px 20px;
  display: flex; flex-wrap: wrap; align-items: center; justify-content: space-between; gap: 12px 24px; }
#dp-docs-header .dp-brand { display: flex; align-items: center; gap: 10px; font-size: 18px; font-weight: 600; }
#dp-docs-header .dp-brand svg { width: 32px; height: 32px; flex: none; }
/* At most one row of fields wide, so the status line wraps under them instead of pushing the form below the brand. */
#dp-docs-header form { display: flex; flex-wrap: wrap; align-items: center; justify-content: flex-end; gap: 8px;
  max-width: 640px; margin: 0; font-size: 14px; }
#dp-docs-header label { display: flex; align-items: center; gap: 6px; }
#dp-docs-header input { width: 190px; padding: 6px 8px; border: 1px solid #8aa4bd; border-radius: 4px; font-size: 14px; }
#dp-docs-header button { padding: 6px 16px; border: 0; border-radius: 4px; background: #6fd3a8; color: #10263a;
  font-size: 14px; font-weight: 600; cursor: pointer; }
#dp-docs-header button:disabled { opacity: 0.6; cursor: default; }
#dp-docs-header .dp-status { flex-basis: 100%; margin: 0; min-height: 1.2em; text-align: right; font-size: 13px; }
#dp-docs-header .dp-status[data-kind="error"] { color: #ffb4a9; }
#dp-docs-header .dp-status[data-kind="ok"] { color: #b9f0d6; }
`;

/**
 * Browser code. Adds the header with a sign-in form above Swagger UI; a sign-in posts to
 * the login operation on this origin and hands the access token to Swagger UI exactly as
 * the Authorize dialog would, so "Try it out" sends it and the padlocks close.
 * Texts go in with textContent only: nothing from the server or the user becomes markup.
 */
export const DOCS_SCRIPT = `(function () {
  'use strict';
  var LOGIN_PATH = '/api/v1/auth/login';
  var ui = null;
  var schemeName = null;

  var header = document.createElement('header');
  header.id = 'dp-docs-header';
  header.innerHTML =
    '<div class="dp-bar">' +
    '<div class="dp-brand">' + ${JSON.stringify(PRODUCT_MARK_SVG)} + '<span>Data Platform Management API</span></div>' +
    '<form id="dp-login" aria-label="Sign in to try the API">' +
    '<label>Email <input name="email" type="email" autocomplete="username" required></label>' +
    '<label>Password <input name="password" type="password" autocomplete="current-password" required></label>' +
    '<button type="submit" disabled>Sign in</button>' +
    '<p class="dp-status" role="status" aria-live="polite">Sign in to try the API with your account, or use Authorize with a token or API key.</p>' +
    '</form></div>';
  document.body.insertBefore(header, document.getElementById('swagger-ui'));
  var form = header.querySelector('form');
  var submit = form.querySelector('button');
  var status = form.querySelector('.dp-status');

  function show(text, kind) {
    status.textContent = text;
    if (kind) status.setAttribute('data-kind', kind);
    else status.removeAttribute('data-kind');
  }

  /** The name the document gives its bearer scheme (the Authorize dialog's entry). */
  function bearerSchemeName(system) {
    var schemes = system.specSelectors.specJson().getIn(['components', 'securitySchemes']);
    var all = schemes && schemes.toJS ? schemes.toJS() : {};
    for (var name in all) {
      if (all[name].type === 'http' && String(all[name].scheme).toLowerCase() === 'bearer') return name;
    }
    return null;
  }

  /** The service's error envelope is {error: {code, message}}; anything else gets a plain sentence. */
  function failure(response, body) {
    var message = body && body.error && typeof body.error.message === 'string' ? body.error.message : 'Sign-in failed';
    return message + ' (HTTP ' + response.status + ')';
  }

  async function login(email, password) {
    var response = await fetch(LOGIN_PATH, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ email: email, password: password }),
      credentials: 'omit',
    });
    var body = await response.json().catch(function () { return null; });
    if (!response.ok || !body || typeof body.access_token !== 'string') throw new Error(failure(response, body));
    return body;
  }

  async function onSubmit(event) {
    event.preventDefault();
    var email = form.elements.email.value.trim();
    submit.disabled = true;
    show('Signing in...');
    try {
      var tokens = await login(email, form.elements.password.value);
      ui.preauthorizeApiKey(schemeName, tokens.access_token);
      form.elements.password.value = '';
      var minutes = Math.round((tokens.expires_in || 0) / 60);
      show('Signed in as ' + email + (minutes ? ' for ' + minutes + ' min' : '') + '. Try it out now sends your access token.', 'ok');
    } catch (err) {
      // A failed fetch (network, TLS) is a TypeError whose text means nothing to a reader.
      show(err instanceof TypeError ? 'The service could not be reached; try again.' : err.message, 'error');
    } finally {
      submit.disabled = false;
    }
  }

  function attach(system) {
    if (ui) return;
    ui = system;
    schemeName = bearerSchemeName(system);
    var title = system.specSelectors.info().get('title');
    if (title) document.title = title;
    if (!schemeName) {
      show('This document declares no bearer scheme; sign-in is not available here.', 'error');
      return;
    }
    form.addEventListener('submit', onSubmit);
    submit.disabled = false;
  }

  document.addEventListener(${JSON.stringify(UI_READY_EVENT)}, function (event) { attach(event.detail); });
})();
`;
