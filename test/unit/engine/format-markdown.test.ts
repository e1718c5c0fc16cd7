import { describe, expect, it } from 'vitest';
import {
  escapeMarkdown,
  GITHUB_COMMENT_LIMIT,
  renderConfigErrorsMarkdown,
  renderDriftMarkdown,
  renderPlan,
  renderPlanMarkdown,
  SENSITIVE,
  type DriftEntry,
  type Plan,
  type PlannedChange,
} from '../../../src/engine/index.js';

type Fixture = Pick<PlannedChange, 'action' | 'yamlKind' | 'name'> & Partial<PlannedChange>;

/** A planned change as makePlan builds it, with only what the renderer reads. */
function change(c: Fixture): PlannedChange {
  return {
    kind: c.yamlKind.toLowerCase(),
    changes: [],
    reasons: [],
    notes: [],
    ownership: 'owned',
    key: `${c.yamlKind}/${c.project ?? ''}/${c.name}`,
    patchFields: [],
    ...c,
  };
}

function plan(changes: PlannedChange[], extra: Partial<Plan> = {}): Plan {
  const summary: Plan['summary'] = { create: 0, update: 0, replace: 0, delete: 0, 'no-op': 0, unsupported: 0 };
  for (const c of changes) {
    summary[c.action]++;
    if (c.unsupported) summary.unsupported++;
  }
  return { sourceId: 'platform', changes, errors: [], warnings: [], managedCount: changes.length, summary, ...extra };
}

const SMALL = plan([
  change({ action: 'create', yamlKind: 'Project', name: 'analytics', changes: [{ field: 'name', before: undefined, after: 'analytics' }] }),
  change({
    action: 'create',
    yamlKind: 'Connector',
    project: 'analytics',
    name: 'orders-db',
    changes: [
      { field: 'credentials', before: undefined, after: { username: 'replicator', password: SENSITIVE } },
      { field: 'schedule', before: undefined, after: '0 * * * *' },
    ],
  }),
  change({
    action: 'update',
    yamlKind: 'Pipeline',
    project: 'analytics',
    name: 'nightly',
    id: 'pip_1',
    changes: [{ field: 'schedule', before: '0 2 * * *', after: '0 4 * * *' }],
  }),
  change({ action: 'no-op', yamlKind: 'User', name: 'ops@example.com' }),
]);

/** The ```diff body of the <details> block whose summary contains `subject`. */
function diffOf(md: string, subject: string): string {
  const block = md.split('<details>').find((b) => b.split('\n')[0].includes(subject));
  expect(block, `no details block for ${subject}`).toBeDefined();
  return block!.match(/```diff\n([\s\S]*?)\n```/)![1];
}

describe('renderPlanMarkdown', () => {
  it('headline with the counts and the source, a table per project, a collapsed diff per change', () => {
    const md = renderPlanMarkdown(SMALL);
    expect(
      md.startsWith(
        '### dpctl plan\n\n**Plan:** 2 to create, 1 to update, 0 to replace, 0 to delete, 1 unchanged · source <code>platform</code>\n',
      ),
    ).toBe(true);
    // A Project is listed in its own table; the unchanged user has no row and no table.
    expect(md).toContain(
      '#### Project <code>analytics</code>\n\n| Action | Kind | Name |\n|---|---|---|\n| ➕ create | Project | <code>analytics</code> |\n| ➕ create | Connector | <code>orders-db</code> |\n| ✏️ update | Pipeline | <code>nightly</code> |\n',
    );
    expect(md).not.toContain('Tenant-wide');
    expect(md).not.toContain('ops@example.com');
    expect(md).toContain(
      '\n<details><summary>✏️ update Pipeline <code>analytics/nightly</code></summary>\n\n```diff\n- schedule = "0 2 * * *"\n+ schedule = "0 4 * * *"\n```\n\n</details>\n',
    );
    expect(diffOf(md, 'Connector')).toBe('+ credentials = {"username":"replicator","password":"(sensitive)"}\n+ schedule = "0 * * * *"');
    expect(md.match(/<details>/g)).toHaveLength(3);
  });

  it('secrets stay masked: a sensitive field shows (sensitive) whatever values it carries', () => {
    const md = renderPlanMarkdown(
      plan([
        change({
          action: 'update',
          yamlKind: 'Connector',
          project: 'p',
          name: 'db',
          notes: ['a secret value changed (fingerprint differs)'],
          // The plan never holds a secret's value; the renderer masks by the flag all the same.
          changes: [
            { field: 'credentials.password', before: 'old-pw-1', after: 'new-pw-2', sensitive: true },
            { field: 'labels.dpctl.dev/secrets-sha', before: 'aaaa1111', after: 'bbbb2222' },
          ],
        }),
      ]),
    );
    expect(md).not.toMatch(/old-pw-1|new-pw-2/);
    expect(diffOf(md, 'db')).toBe(
      [
        '# note: a secret value changed (fingerprint differs)',
        '- credentials.password = (sensitive)',
        '+ credentials.password = (sensitive)',
        '- labels.dpctl.dev/secrets-sha = "aaaa1111"',
        '+ labels.dpctl.dev/secrets-sha = "bbbb2222"',
      ].join('\n'),
    );
  });

  it('escapes names: a | or < cannot break the table or the summary, and markdown does not render', () => {
    const evil = 'a|b<img src=x>*c*_d_`e`\n# f';
    const md = renderPlanMarkdown(
      plan([
        change({
          action: 'create',
          yamlKind: 'Connector',
          project: 'p|<q>',
          name: evil,
          changes: [{ field: 'name', before: undefined, after: evil }],
        }),
      ]),
    );
    const row = md.split('\n').find((l) => l.startsWith('| ➕'))!;
    expect(row).toBe('| ➕ create | Connector | <code>a\\|b&lt;img src=x&gt;\\*c\\*\\_d\\_\\`e\\` # f</code> |');
    // Four cells: no unescaped pipe inside the name.
    expect(row.split(/(?<!\\)\|/).length - 2).toBe(3);
    expect(md).toContain('#### Project <code>p\\|&lt;q&gt;</code>');
    // <summary> is an HTML block, where markdown is not parsed: entities only, no backslashes.
    expect(md).toContain('<summary>➕ create Connector <code>p|&lt;q&gt;/a|b&lt;img src=x&gt;*c*_d_`e` # f</code></summary>');
    // Raw only inside the ```diff block, where GitHub shows it as text.
    expect(md.replace(/```diff[\s\S]*?```/g, '')).not.toContain('<img');
    // In the diff the value is JSON on one line.
    expect(diffOf(md, 'Connector')).toBe('+ name = "a|b<img src=x>*c*_d_`e`\\n# f"');
  });

  it('escapeMarkdown: leading block markers and HTML entities', () => {
    expect(escapeMarkdown('# title')).toBe('\\# title');
    expect(escapeMarkdown('- item')).toBe('\\- item');
    expect(escapeMarkdown('1. first')).toBe('1\\. first');
    expect(escapeMarkdown('a & b ~~c~~ [l](u) \\')).toBe('a &amp; b \\~\\~c\\~\\~ \\[l\\](u) \\\\');
  });

  it('no changes', () => {
    const md = renderPlanMarkdown(
      plan([
        change({ action: 'no-op', yamlKind: 'Project', name: 'a' }),
        change({ action: 'no-op', yamlKind: 'User', name: 'u@example.com' }),
      ]),
    );
    expect(md).toBe('### dpctl plan\n\n**No changes.** 2 resources in sync · source <code>platform</code>\n');
  });

  it('the conflicts that follow from a project’s are listed under it as the terminal lists them: five and a count', () => {
    const root = { code: 'ownership_conflict' as const, subject: 'Project/b', message: 'managed by another source "x"', followers: 40 };
    const followers = Array.from({ length: 40 }, (_, i) => ({
      code: 'ownership_conflict' as const,
      subject: `Connector/c${i} (project b)`,
      message: 'managed by another source "x"',
      follows: true,
    }));
    const md = renderPlanMarkdown(plan([], { errors: [root, ...followers] }));
    expect(md).toContain(
      [
        '> **41 errors: nothing can be applied until they are fixed.**',
        '>',
        '> - Project/b: managed by another source "x" (and 40 errors that follow from it)',
        ...followers.slice(0, 5).map((f) => `> -   ↳ ${f.subject}: ${f.message}`),
        '> -   ↳ ... and 35 more',
        '',
      ].join('\n'),
    );
  });

  it('errors come first, in a caution alert, before the headline; warnings after it', () => {
    const md = renderPlanMarkdown(
      plan(SMALL.changes, {
        errors: [
          {
            code: 'ownership_conflict',
            file: 'analytics/sources.yaml',
            line: 3,
            column: 5,
            subject: 'Connector orders-db',
            message: 'managed by another source "x|y"',
          },
          { code: 'invalid_resource', message: '- starts like a list item' },
        ],
        warnings: ['Project analytics: pruning it also deletes 1 resource'],
      }),
    );
    const caution = md.indexOf('> [!CAUTION]');
    expect(caution).toBeGreaterThan(0);
    expect(caution).toBeLessThan(md.indexOf('**Plan:**'));
    expect(md).toContain(
      '> [!CAUTION]\n> **2 errors: nothing can be applied until they are fixed.**\n>\n> - analytics/sources.yaml:3:5: Connector orders-db: managed by another source "x\\|y"\n> - \\- starts like a list item\n',
    );
    expect(md.indexOf('> [!WARNING]')).toBeGreaterThan(md.indexOf('**Plan:**'));
    expect(md).toContain('> [!WARNING]\n> **1 warning**\n>\n> - Project analytics: pruning it also deletes 1 resource\n');
    expect(md.indexOf('> [!WARNING]')).toBeLessThan(md.indexOf('####'));
  });

  it('delete, replace and unsupported changes: reasons and notes as # lines, the deleted resource as a - line', () => {
    const md = renderPlanMarkdown(
      plan([
        change({
          action: 'delete',
          yamlKind: 'Classification',
          project: 'p',
          name: 'old',
          reasons: ['managed by this source and no longer in the config'],
        }),
        change({
          action: 'replace',
          yamlKind: 'InfrastructureResource',
          project: 'p',
          name: 'wh',
          reasons: ['type cannot change in place'],
          unsupported: 'the service has no delete for infrastructure_resource, so it cannot be replaced',
          changes: [{ field: 'type', before: 'a', after: 'b' }],
        }),
        change({
          action: 'create',
          yamlKind: 'User',
          name: 'u@example.com',
          changes: [{ field: 'email', before: undefined, after: 'u@example.com' }],
        }),
      ]),
    );
    expect(md).toContain('**Plan:** 1 to create, 0 to update, 1 to replace, 1 to delete, 0 unchanged (1 not supported by the service)');
    // Tenant-wide resources (users) first.
    expect(md.indexOf('#### Tenant-wide')).toBeLessThan(md.indexOf('#### Project <code>p</code>'));
    expect(md).toContain('| ♻️ replace ⚠️ not supported | InfrastructureResource | <code>wh</code> |');
    expect(diffOf(md, 'Classification')).toBe('# managed by this source and no longer in the config\n- Classification p/old');
    expect(diffOf(md, 'InfrastructureResource')).toBe(
      '# type cannot change in place\n# NOT SUPPORTED by the service: the service has no delete for infrastructure_resource, so it cannot be replaced; reported, not applied\n- type = "a"\n+ type = "b"',
    );
  });

  it('stays within the comment limit: details are cut, and the comment says how many were left out', () => {
    const big = 'x'.repeat(3_000);
    const changes = Array.from({ length: 40 }, (_, i) =>
      change({
        action: 'create',
        yamlKind: 'Transformation',
        project: 'p',
        name: `t${i}`,
        changes: [{ field: 'sql', before: undefined, after: big }],
      }),
    );
    const md = renderPlanMarkdown(plan(changes));
    expect(md.length).toBeLessThanOrEqual(GITHUB_COMMENT_LIMIT);
    // Every row is still listed in the table.
    for (let i = 0; i < 40; i++) expect(md).toContain(`| ➕ create | Transformation | <code>t${i}</code> |`);
    const shown = md.match(/<details>/g)!.length;
    expect(shown).toBeGreaterThan(10);
    expect(shown).toBeLessThan(40);
    expect(md).toContain(
      `_Details of ${40 - shown} of 40 resources left out to fit GitHub's 65,536-character comment limit; run the command locally for the full diff._`,
    );
    // Whole blocks only: every details block that was started is closed.
    expect(md.match(/<\/details>/g)!.length).toBe(shown);
    expect(md.endsWith('full diff._\n')).toBe(true);
  });

  it('a smaller limit cuts the table too, and a huge error list', () => {
    const changes = Array.from({ length: 200 }, (_, i) =>
      change({
        action: 'update',
        yamlKind: 'Pipeline',
        project: 'p',
        name: `pipeline-${i}`,
        changes: [{ field: 'schedule', before: '0 1 * * *', after: '0 2 * * *' }],
      }),
    );
    const md = renderPlanMarkdown(
      plan(changes, {
        errors: Array.from({ length: 100 }, (_, i) => ({
          code: 'invalid_resource' as const,
          message: `error number ${i} with a long explanation of what went wrong`,
        })),
      }),
      { maxLength: 6_000 },
    );
    expect(md.length).toBeLessThanOrEqual(6_000);
    expect(md).toMatch(/> - _…and \d+ more errors, left out to fit GitHub's comment size limit_\n/);
    expect(md).toContain('**Plan:** 0 to create, 200 to update');
    expect(md).toMatch(/\n_…(and \d+ more|200) not listed, to fit GitHub's comment size limit\._\n$/);
    expect(md).not.toContain('<details>');
  });
});

describe('renderDriftMarkdown and renderConfigErrorsMarkdown', () => {
  const entry = (e: Partial<DriftEntry> & Pick<DriftEntry, 'type' | 'yamlKind' | 'name' | 'detail'>): DriftEntry => ({
    kind: e.yamlKind.toLowerCase(),
    changes: [],
    ...e,
  });

  it('drift: counts, a table with the detail, the diff server (-) against config (+)', () => {
    const md = renderDriftMarkdown(
      'platform',
      [
        entry({
          type: 'changed',
          yamlKind: 'Connector',
          project: 'analytics',
          name: 'orders-db',
          detail: 'schedule',
          changes: [{ field: 'schedule', before: '5 * * * *', after: '0 * * * *' }],
        }),
        entry({
          type: 'unmanaged',
          yamlKind: 'Classification',
          project: 'analytics',
          name: 'by-hand',
          detail: 'not declared (made by hand)',
        }),
      ],
      [],
    );
    expect(md).toContain('**Drift:** 1 changed, 0 deleted, 0 orphaned, 1 unmanaged · source <code>platform</code>');
    expect(md).toContain(
      '| Drift | Kind | Name | Detail |\n|---|---|---|---|\n| ✏️ changed | Connector | <code>orders-db</code> | schedule |\n| ❔ unmanaged | Classification | <code>by-hand</code> | not declared (made by hand) |',
    );
    expect(diffOf(md, 'Connector')).toBe('# - on the server, + in the config\n- schedule = "5 * * * *"\n+ schedule = "0 * * * *"');
    expect(md.match(/<details>/g)).toHaveLength(1);
    expect(renderDriftMarkdown('platform', [], [])).toBe(
      '### dpctl drift\n\n**No drift.** The platform matches the config. · source <code>platform</code>\n',
    );
  });

  it('an invalid config: the errors, and that nothing was planned', () => {
    expect(
      renderConfigErrorsMarkdown('plan', [
        { code: 'invalid_field', file: 'a.yaml', line: 2, column: 1, field: 'spec.config.port', message: 'must be integer' },
      ]),
    ).toBe(
      '### dpctl plan\n\n> [!CAUTION]\n> **1 error: nothing can be applied until it is fixed.**\n>\n> - a.yaml:2:1: spec.config.port: must be integer\n\n**Invalid configuration:** nothing was planned.\n',
    );
  });
});

describe('the text plan’s last line', () => {
  const noOp = change({ action: 'no-op', yamlKind: 'Project', name: 'a' });
  const error = { code: 'ownership_conflict' as const, subject: 'Project/b', message: 'managed by another source "x"' };
  const last = (p: Plan) => renderPlan(p, { colour: false }).trimEnd().split('\n').pop();

  it('says "No changes" only when the plan has no errors', () => {
    expect(last(plan([noOp]))).toBe('No changes: 1 resource in sync.');
    // A user read "No changes" after the errors as all being well.
    expect(last(plan([noOp], { errors: [error] }))).toBe('No changes: 1 resource in sync; but 1 error (above): nothing can be applied.');
    const create = change({ action: 'create', yamlKind: 'Project', name: 'c' });
    expect(last(plan([create], { errors: [error, error] }))).toBe(
      'Plan: 1 to create, 0 to update, 0 to replace, 0 to delete, 0 unchanged; but 2 errors (above): nothing can be applied.',
    );
  });

  it('lists the conflicts that follow from a project’s under it, the first few and a count, and counts root causes', () => {
    const followers = Array.from({ length: 40 }, (_, i) => ({
      code: 'ownership_conflict' as const,
      subject: `Connector/c${i} (project b)`,
      message: 'managed by another source "x"',
      follows: true,
    }));
    const lines = renderPlan(plan([noOp], { errors: [{ ...error, followers: 40 }, ...followers] }), { colour: false })
      .trimEnd()
      .split('\n');
    expect(lines.slice(-8)).toEqual([
      'error: Project/b: managed by another source "x" (and 40 errors that follow from it)',
      ...followers.slice(0, 5).map((f) => `  ↳ ${f.subject}: ${f.message}`),
      '  ↳ ... and 35 more',
      'No changes: 1 resource in sync; but 41 errors (above; 1 root cause): nothing can be applied.',
    ]);
  });
});
