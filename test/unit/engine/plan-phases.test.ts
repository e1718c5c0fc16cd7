import { describe, expect, it } from 'vitest';
import { addLive, appliedState, config, emptyState, PLAN_OPTIONS, SHOP, SOURCE } from './fixtures.js';
import {
  formatProblem,
  countManaged,
  docKey,
  labelOf,
  makePlan,
  MANAGED_BY_LABEL,
  missingProjectError,
  ownerOf,
  ownershipOf,
  planContext,
  planDocument,
  planDocuments,
  planPrune,
  propagateReplacements,
  tally,
  type PlannedChange,
} from '../../../src/engine/index.js';

/** The plan's phases (engine/plan.ts), each on a small configuration and a live state built by hand. */

const shop = config(SHOP);
const channel = shop.doc('NotificationChannel', 'a');
const project = shop.doc('Project', 'shop');

const contextOf = (state = appliedState(shop), options = {}) =>
  planContext(shop.documents, state, shop.secrets, { ...PLAN_OPTIONS, ...options });
const changeOf = (planned: ReturnType<typeof planDocument>): PlannedChange => {
  if (!planned || !('change' in planned)) throw new Error(`not a change: ${JSON.stringify(planned)}`);
  return planned.change;
};

describe('labels of live resources', () => {
  it('ownerOf reads the managed-by label; labelOf any label; both undefined without labels or a resource', () => {
    const r = { object: { labels: { [MANAGED_BY_LABEL]: 'src', team: 'data' } } };
    expect(ownerOf(r)).toBe('src');
    expect(labelOf(r, 'team')).toBe('data');
    expect(ownerOf({ object: {} })).toBeUndefined();
    expect(ownerOf(undefined)).toBeUndefined();
  });

  it('countManaged counts the resources labelled by this source only', () => {
    const state = appliedState(shop);
    expect(countManaged(state, SOURCE)).toBe(3);
    expect(countManaged(state, 'other')).toBe(0);
    addLive(state, 'notification_channel', { id: 'nc-b', name: 'b', type: 'email', labels: { [MANAGED_BY_LABEL]: 'other' } }, 'shop');
    expect(countManaged(state, 'other')).toBe(1);
  });
});

describe('ownershipOf', () => {
  const live = (owner?: string) =>
    addLive(emptyState(), 'notification_channel', { id: 'nc-a', name: 'a', labels: owner ? { [MANAGED_BY_LABEL]: owner } : {} }, 'shop');

  it('new and owned resources get the managed-by label', () => {
    expect(ownershipOf(channel, undefined, PLAN_OPTIONS)).toEqual({ ownership: 'new', labels: { [MANAGED_BY_LABEL]: SOURCE } });
    expect(ownershipOf(channel, live(SOURCE), PLAN_OPTIONS)).toEqual({ ownership: 'owned', labels: { [MANAGED_BY_LABEL]: SOURCE } });
    // The document's own labels come first.
    expect(ownershipOf(project, undefined, PLAN_OPTIONS)).toEqual({
      ownership: 'new',
      labels: { team: 'data', [MANAGED_BY_LABEL]: SOURCE },
    });
  });

  it('a hand-made resource is unmanaged (no label), or adopted with --adopt', () => {
    expect(ownershipOf(channel, live(), PLAN_OPTIONS)).toEqual({ ownership: 'unmanaged', labels: {} });
    expect(ownershipOf(channel, live(), { ...PLAN_OPTIONS, adopt: true })).toEqual({
      ownership: 'adopted',
      labels: { [MANAGED_BY_LABEL]: SOURCE },
    });
  });

  it("another source's resource is a conflict, never taken over (not even with --adopt)", () => {
    const expected = {
      conflict: {
        code: 'ownership_conflict',
        ...channel.location, // where the document is: a user fixes the name or --source-id there
        subject: 'NotificationChannel/a (project shop)',
        message: `managed by another source "other" (label ${MANAGED_BY_LABEL}); not touching it (if this configuration is that source, pass --source-id other)`,
      },
    };
    expect(ownershipOf(channel, live('other'), PLAN_OPTIONS)).toEqual(expected);
    expect(ownershipOf(channel, live('other'), { ...PLAN_OPTIONS, adopt: true })).toEqual(expected);
  });

  it('a kind without labels is untracked when it exists', () => {
    const users = config(
      'apiVersion: dataplatform/v1\nkind: User\nmetadata: { name: ops@example.com }\nspec: { name: Ops, role: read-only }\n',
    );
    const user = users.doc('User', 'ops@example.com');
    const r = addLive(emptyState(), 'user', { id: 'u1', email: 'ops@example.com', name: 'Ops', role: 'read-only' });
    expect(ownershipOf(user, undefined, PLAN_OPTIONS)).toEqual({ ownership: 'new' });
    expect(ownershipOf(user, r, PLAN_OPTIONS)).toEqual({ ownership: 'untracked' });
  });
});

describe('missingProjectError', () => {
  const loose = config(
    'apiVersion: dataplatform/v1\nkind: NotificationChannel\nmetadata: { name: a, project: ops }\nspec: { type: email, config: { email_addresses: [a@example.com] } }\n',
    { allowUndeclaredProjects: true },
  );
  const doc = loose.doc('NotificationChannel', 'a');
  const ctx = (state = emptyState()) => planContext(loose.documents, state, loose.secrets, PLAN_OPTIONS);

  it('names the project and the projects the credential sees', () => {
    const state = emptyState();
    addLive(state, 'project', { id: 'p1', name: 'shop' });
    expect(missingProjectError(doc, ctx(state))).toMatchObject({
      code: 'undeclared_project',
      field: 'metadata.project',
      message: 'no project "ops" on the server and no Project document declares it (projects this credential sees: shop)',
    });
    expect(formatProblem(missingProjectError(doc, ctx())!)).toMatch(/metadata\.project: .*projects this credential sees: none\)$/);
  });

  it('is undefined when the project exists or is declared', () => {
    const state = emptyState();
    addLive(state, 'project', { id: 'p1', name: 'ops' });
    expect(missingProjectError(doc, ctx(state))).toBeUndefined();
    expect(missingProjectError(channel, contextOf(emptyState()))).toBeUndefined();
  });
});

describe('planDocument', () => {
  it('plans a create for what does not exist: every declared field, the managed-by label', () => {
    const change = changeOf(planDocument(channel, contextOf(emptyState())));
    expect(change).toMatchObject({ action: 'create', ownership: 'new', labels: { [MANAGED_BY_LABEL]: SOURCE }, reasons: [], notes: [] });
    expect(change.changes.map((c) => c.field)).toEqual(['config', 'labels', 'name', 'type']);
  });

  it('plans a no-op for what matches, an update for a changed field, a replace for an immutable one', () => {
    const state = appliedState(shop);
    expect(changeOf(planDocument(channel, contextOf(state)))).toMatchObject({
      action: 'no-op',
      ownership: 'owned',
      id: 'notification_channel-a',
    });
    const live = state.resources.get(changeOf(planDocument(channel, contextOf(state))).key)!;
    live.object.config = { email_addresses: ['b@example.com'] };
    expect(changeOf(planDocument(channel, contextOf(state)))).toMatchObject({ action: 'update', patchFields: ['config'] });
    live.object.type = 'webhook';
    expect(changeOf(planDocument(channel, contextOf(state)))).toMatchObject({
      action: 'replace',
      reasons: ['type cannot change in place'],
    });
  });

  it('marks a change the service cannot apply (a service run with --strict-spec serves no update or delete of channels)', () => {
    const state = appliedState(shop);
    const live = state.resources.get(changeOf(planDocument(channel, contextOf(state))).key)!;
    live.object.config = { email_addresses: ['b@example.com'] };
    const strict = { specOperations: true };
    expect(changeOf(planDocument(channel, contextOf(state, strict)))).toMatchObject({
      action: 'update',
      unsupported: 'the service has no update for notification_channel',
    });
    live.object.type = 'webhook';
    expect(changeOf(planDocument(channel, contextOf(state, strict)))).toMatchObject({
      action: 'replace',
      unsupported: 'the service has no delete for notification_channel, so it cannot be replaced',
    });
  });

  it('leaves out a disabled document, and reports an observe-only change without applying it', () => {
    const observed = config(
      SHOP.replace(
        'metadata: { name: a, project: shop }',
        'metadata: { name: a, project: shop, annotations: { dpctl.dev/reconcile: observe } }',
      ),
    );
    const disabled = config(
      SHOP.replace(
        'metadata: { name: a, project: shop }',
        'metadata: { name: a, project: shop, annotations: { dpctl.dev/reconcile: disabled } }',
      ),
    );
    const ctx = (f: typeof shop) => planContext(f.documents, emptyState(), f.secrets, PLAN_OPTIONS);
    expect(planDocument(disabled.doc('NotificationChannel', 'a'), ctx(disabled))).toBeUndefined();
    const change = changeOf(planDocument(observed.doc('NotificationChannel', 'a'), ctx(observed)));
    expect(change).toMatchObject({ action: 'create', observeOnly: true });
    expect(change.notes).toEqual(['observe only (dpctl.dev/reconcile: observe): reported, never applied']);
  });

  it("gives errors instead of a change: another source's resource", () => {
    const state = appliedState(shop, 'other');
    expect(planDocument(channel, contextOf(state))).toEqual({
      errors: [
        {
          code: 'ownership_conflict',
          ...channel.location,
          subject: 'NotificationChannel/a (project shop)',
          message: `managed by another source "other" (label ${MANAGED_BY_LABEL}); not touching it (if this configuration is that source, pass --source-id other)`,
        },
      ],
      owner: 'other',
    });
  });

  it("another source's project is the root cause of its resources' conflicts with the same owner", () => {
    const state = appliedState(shop, 'other');
    const escalate = shop.doc('EscalationPolicy', 'escalate');
    // One resource of the project is another source's again: its conflict is a root cause of its own.
    state.resources.get(docKey(escalate))!.object.labels = { [MANAGED_BY_LABEL]: 'third' };
    const { changes, errors } = planDocuments(shop.documents, contextOf(state));
    expect(changes).toEqual([]);
    expect(errors.map((e) => [e.subject, e.followers, e.follows])).toEqual([
      ['Project/shop', 1, undefined],
      ['NotificationChannel/a (project shop)', undefined, true],
      ['EscalationPolicy/escalate (project shop)', undefined, undefined],
    ]);
    expect(errors.map(formatProblem)[0]).toMatch(/pass --source-id other\) \(and 1 error that follows from it\)$/);
    expect(errors.map(formatProblem)[1]).toMatch(/^ {2}↳ .*NotificationChannel\/a/);
  });

  it('planDocuments keeps document order and gathers the errors', () => {
    const state = appliedState(shop);
    state.resources.get(changeOf(planDocument(channel, contextOf(state))).key)!.object.labels = { [MANAGED_BY_LABEL]: 'other' };
    const { changes, errors } = planDocuments(shop.documents, contextOf(state));
    expect(changes.map((c) => c.name)).toEqual(['shop', 'escalate']);
    expect(errors).toHaveLength(1);
  });
});

describe('propagateReplacements', () => {
  it('replaces what references a replaced resource, with the reason; notes who references it', () => {
    const state = appliedState(shop);
    const ctx = contextOf(state);
    const { changes } = planDocuments(shop.documents, ctx);
    const a = changes.find((c) => c.name === 'a')!;
    a.action = 'replace';
    const warnings = propagateReplacements(changes, state, false);
    expect(warnings).toEqual([]);
    expect(changes.find((c) => c.name === 'escalate')).toMatchObject({
      action: 'replace',
      reasons: ['depends on NotificationChannel shop/a, which is replaced'],
    });
    expect(a.notes).toEqual(['referenced by EscalationPolicy escalate']);
    expect(changes.find((c) => c.name === 'shop')!.action).toBe('no-op');
  });

  it('warns about a live resource outside the config that references a replaced one (once)', () => {
    const state = appliedState(shop);
    const { changes } = planDocuments(shop.documents, contextOf(state));
    changes.find((c) => c.name === 'a')!.action = 'replace';
    addLive(
      state,
      'escalation_policy',
      { id: 'ep-x', name: 'hand-made', steps: [{ delay_minutes: 0, channel_ids: ['notification_channel-a', 'notification_channel-a'] }] },
      'shop',
    );
    expect(propagateReplacements(changes, state, false)).toEqual([
      'NotificationChannel shop/a: EscalationPolicy hand-made references it and is not in the config, so deleting it will fail (409)',
    ]);
  });

  it('changes nothing when nothing is replaced', () => {
    const state = appliedState(shop);
    const { changes } = planDocuments(shop.documents, contextOf(state));
    const before = structuredClone(changes.map((c) => [c.action, c.reasons, c.notes]));
    expect(propagateReplacements(changes, state, false)).toEqual([]);
    expect(changes.map((c) => [c.action, c.reasons, c.notes])).toEqual(before);
  });
});

describe('planPrune', () => {
  const declaredKeys = (fixture: typeof shop) => new Set(fixture.documents.map(docKey));
  const prune = { ...PLAN_OPTIONS, prune: true };

  it('deletes the managed resources no document declares; never a hand-made one', () => {
    const state = appliedState(shop);
    addLive(state, 'notification_channel', { id: 'nc-b', name: 'b', labels: { [MANAGED_BY_LABEL]: SOURCE } }, 'shop');
    addLive(state, 'notification_channel', { id: 'nc-c', name: 'c', labels: {} }, 'shop');
    const out = planPrune(state, declaredKeys(shop), 4, prune);
    expect(out.changes.map((c) => [c.action, c.yamlKind, c.name, c.id, c.reasons])).toEqual([
      ['delete', 'NotificationChannel', 'b', 'nc-b', ['managed by this source and no longer in the config']],
    ]);
    expect(out.warnings).toEqual([]);
    expect(out.errors).toEqual([]);
  });

  it('a pruned project takes what is inside with it', () => {
    const state = appliedState(shop);
    const out = planPrune(state, new Set(), 3, prune);
    expect(out.changes.map((c) => c.name)).toEqual(['shop']);
    expect(out.changes[0].notes).toEqual(['deleting a project deletes everything in it (2 resources)']);
    expect(out.warnings).toEqual([]);
  });

  it('a project holding resources this source does not manage is kept, and its managed contents pruned one by one', () => {
    const state = appliedState(shop);
    addLive(state, 'notification_channel', { id: 'nc-c', name: 'c', labels: {} }, 'shop');
    addLive(state, 'notification_channel', { id: 'nc-d', name: 'd', labels: { [MANAGED_BY_LABEL]: 'another-repo' } }, 'shop');
    const out = planPrune(state, new Set(), 3, prune);
    // The project's own managed resources go; the project and the two others stay.
    expect(out.changes.map((c) => [c.action, c.yamlKind, c.name])).toEqual([
      ['delete', 'NotificationChannel', 'a'],
      ['delete', 'EscalationPolicy', 'escalate'],
    ]);
    expect(out.warnings).toEqual([
      'Project shop is not pruned: it holds 2 resources this source does not manage (NotificationChannel c, NotificationChannel d), ' +
        'which deleting the project would delete too. The managed resources in it are pruned; once the others are deleted by hand ' +
        '(or moved), the next prune deletes the project. To keep the project, declare it again',
    ]);
    expect(out.errors).toEqual([]);
    // Once they are gone, the next prune deletes the project.
    state.resources.delete([...state.resources.keys()].find((k) => k.endsWith('\u0000c'))!);
    state.resources.delete([...state.resources.keys()].find((k) => k.endsWith('\u0000d'))!);
    expect(planPrune(state, new Set(), 3, prune).changes.map((c) => c.name)).toEqual(['shop']);
  });

  it('names at most five of what keeps a project, and counts the rest', () => {
    const state = appliedState(shop);
    for (let i = 0; i < 8; i++) addLive(state, 'notification_channel', { id: `nc-h${i}`, name: `h${i}`, labels: {} }, 'shop');
    expect(planPrune(state, new Set(), 3, prune).warnings[0]).toContain(
      'it holds 8 resources this source does not manage (NotificationChannel h0, NotificationChannel h1, NotificationChannel h2, NotificationChannel h3, NotificationChannel h4, and 3 more)',
    );
  });

  it('a whole project is not pruned by a source id taken from the directory name: another repository may share it', () => {
    const state = appliedState(shop);
    const defaulted = planPrune(state, new Set(), 3, { ...prune, sourceIdDefaulted: true });
    expect(defaulted.changes.map((c) => c.name)).toEqual(['shop']);
    expect(defaulted.errors).toEqual([
      {
        code: 'project_prune_default_source',
        message: `refusing to prune project "shop" with the source id "${SOURCE}" taken from the config directory's name: another repository with a directory of that name has the same one, and its projects look like this one's. If the project is this repository's, pass --source-id ${SOURCE}`,
      },
    ]);
    // Given, the same id prunes; and what is inside a declared project is pruned either way.
    expect(planPrune(state, new Set(), 3, prune).errors).toEqual([]);
    const withoutChannel = new Set([...declaredKeys(shop)].filter((k) => k !== docKey(channel)));
    const inside = planPrune(state, withoutChannel, 3, { ...prune, sourceIdDefaulted: true });
    expect(inside.changes.map((c) => c.name)).toEqual(['a']);
    expect(inside.errors).toEqual([]);
  });

  it('each pruned project counts only what is inside it', () => {
    const state = appliedState(shop);
    addLive(state, 'project', { id: 'p-other', name: 'other', labels: { [MANAGED_BY_LABEL]: SOURCE } });
    addLive(state, 'notification_channel', { id: 'nc-o', name: 'c', labels: { [MANAGED_BY_LABEL]: SOURCE } }, 'other');
    const out = planPrune(state, new Set(), 5, prune);
    expect(out.changes.map((c) => [c.name, c.notes])).toEqual([
      ['shop', ['deleting a project deletes everything in it (2 resources)']],
      ['other', ['deleting a project deletes everything in it (1 resource)']],
    ]);
    expect(out.warnings).toEqual([]);
  });

  it('refuses to delete more than the larger of 5 and 20% of the managed resources, unless allowed', () => {
    const state = emptyState();
    for (let i = 0; i < 6; i++) addLive(state, 'project', { id: `p${i}`, name: `p${i}`, labels: { [MANAGED_BY_LABEL]: SOURCE } });
    expect(planPrune(state, new Set(), 6, prune).errors).toEqual([
      {
        code: 'mass_delete',
        message:
          'refusing to delete 6 of 6 managed resources (more than 5, the larger of 5 and 20%): check the path and --source-id, or pass --allow-mass-delete',
      },
    ]);
    expect(planPrune(state, new Set(), 6, { ...prune, allowMassDelete: true }).errors).toEqual([]);
    expect(planPrune(state, new Set(), 30, prune).errors).toEqual([]);
  });
});

describe('tally and makePlan', () => {
  it('tally counts each action and the unsupported changes', () => {
    const changes = [
      { action: 'create' },
      { action: 'create', unsupported: 'no' },
      { action: 'no-op' },
      { action: 'delete' },
    ] as PlannedChange[];
    expect(tally(changes)).toEqual({ create: 2, update: 0, replace: 0, delete: 1, 'no-op': 1, unsupported: 1 });
  });

  it('a prune that a resource outside the plan references warns that its delete will fail, naming it', () => {
    const state = appliedState(shop);
    addLive(state, 'classification', { id: 'cls-old', name: 'old', labels: { [MANAGED_BY_LABEL]: SOURCE } }, 'shop');
    addLive(state, 'classification', { id: 'cls-free', name: 'free', labels: { [MANAGED_BY_LABEL]: SOURCE } }, 'shop');
    // Made by hand: not in the config, not pruned.
    addLive(state, 'masking_policy', { id: 'msk-1', name: 'by-hand', classification_id: 'cls-old', labels: {} }, 'shop');
    addLive(state, 'masking_policy', { id: 'msk-2', name: 'by-hand-2', classification_id: 'cls-old', labels: {} }, 'shop');
    const plan = makePlan(shop.documents, state, shop.secrets, { ...PLAN_OPTIONS, prune: true });
    expect(plan.changes.filter((c) => c.action === 'delete').map((c) => c.name)).toEqual(['old', 'free']);
    expect(plan.warnings).toEqual([
      'Classification shop/old: MaskingPolicy by-hand (and 1 more) references it and is not in the config, so pruning it will fail (409): change or delete that first',
    ]);
  });

  it('makePlan is the phases in order: documents, propagation, prune, tally', () => {
    const state = appliedState(shop);
    state.resources.get(changeOf(planDocument(channel, contextOf(state))).key)!.object.type = 'webhook';
    addLive(state, 'notification_channel', { id: 'nc-b', name: 'b', labels: { [MANAGED_BY_LABEL]: SOURCE } }, 'shop');
    state.warnings.push('cannot list sso_provider: forbidden');
    const plan = makePlan(shop.documents, state, shop.secrets, { ...PLAN_OPTIONS, prune: true });
    expect(plan.changes.map((c) => `${c.action} ${c.name}`)).toEqual(['no-op shop', 'replace a', 'replace escalate', 'delete b']);
    expect(plan.summary).toEqual({ create: 0, update: 0, replace: 2, delete: 1, 'no-op': 1, unsupported: 0 });
    expect(plan).toMatchObject({ sourceId: SOURCE, managedCount: 4, errors: [], warnings: ['cannot list sso_provider: forbidden'] });
  });
});
