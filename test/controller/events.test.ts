import { describe, expect, it } from 'vitest';
import { runEvents } from '../../src/controller/events.js';
import type { ControllerStatus, ResourceStatus } from '../../src/controller/status.js';

/** Which notifications a run's status gives, from the status before and after it. */
const row = (name: string, state: ResourceStatus['state'], extra: Partial<ResourceStatus> = {}): ResourceStatus => ({
  kind: 'connector',
  yaml_kind: 'Connector',
  project: 'p',
  name,
  id: null,
  action: 'no-op',
  state,
  detail: null,
  ...extra,
});

function after(o: {
  result: string;
  revision?: string;
  converged?: string | null;
  errors?: string[];
  warnings?: string[];
  resources: ResourceStatus[];
}): ControllerStatus {
  return {
    controller: { source_id: 'platform' },
    revision: { converged: o.converged ? { id: o.converged, summary: 'fix', at: '' } : null },
    last_run: { result: o.result, revision: o.revision ?? 'r1', errors: o.errors ?? [], warnings: o.warnings },
    resources: o.resources,
  } as unknown as ControllerStatus;
}
const reasons = (events: ReturnType<typeof runEvents>) => events.map((e) => `${e.reason} ${e.subject}: ${e.message}`);

describe('runEvents', () => {
  it('a newly converged revision; a failed run with its first errors', () => {
    expect(
      reasons(
        runEvents({ revision: 'r0', converged: 'r0', resources: [] }, after({ result: 'converged', converged: 'r1', resources: [] })),
      ),
    ).toEqual(['RevisionApplied platform: revision r1 (fix) is applied and healthy']);
    expect(
      reasons(
        runEvents({ revision: 'r1', converged: 'r1', resources: [] }, after({ result: 'converged', converged: 'r1', resources: [] })),
      ),
    ).toEqual([]);
    const failed = runEvents(
      { revision: 'r1', converged: null, resources: [] },
      after({ result: 'incomplete', errors: ['a', 'b', 'c', 'd'], resources: [] }),
    );
    expect(reasons(failed)).toEqual(['ApplyFailed platform: incomplete: a; b; c (and 1 more)']);
  });

  it("a run with plan warnings: one PlanWarning, severity warning, with the first three; the run's result does not change it", () => {
    const warned = runEvents(
      { revision: 'r1', converged: 'r1', resources: [] },
      after({ result: 'converged', converged: 'r1', warnings: ['w1', 'w2', 'w3', 'w4'], resources: [] }),
    );
    expect(reasons(warned)).toEqual(['PlanWarning platform: w1; w2; w3 (and 1 more)']);
    expect(warned[0].severity).toBe('warning');
    // A status of an older controller has no warnings: no event.
    expect(reasons(runEvents({ revision: 'r1', converged: 'r1', resources: [] }, after({ result: 'converged', converged: 'r1', resources: [] })))).toEqual([]);
  });

  it('degraded and recovered resources; drift found, corrected by an apply of the same revision, or gone', () => {
    const before = { revision: 'r1', converged: 'r1', resources: [row('a', 'degraded'), row('b', 'drifted'), row('c', 'in-sync')] };
    const events = runEvents(
      before,
      after({
        result: 'converged',
        converged: 'r1',
        resources: [
          row('a', 'in-sync', { health: 'healthy' }),
          row('b', 'in-sync'),
          row('c', 'applied', { action: 'update', detail: 'update done' }),
          row('d', 'degraded', { health_reason: 'status is error: boom' }),
        ],
      }),
    );
    expect(reasons(events)).toEqual([
      'ResourceRecovered Connector p/a: healthy again',
      'DriftCorrected Connector p/b: no longer differs from the configuration',
      'DriftCorrected Connector p/c: update done: the platform matches the configuration again',
      'ResourceDegraded Connector p/d: status is error: boom',
    ]);
    // A new revision's run: what it did to each resource first, then the revision's own event.
    expect(
      reasons(
        runEvents(
          { ...before, converged: 'r0' },
          after({ result: 'converged', converged: 'r1', resources: [row('a', 'in-sync', { health: 'healthy' })] }),
        ),
      ),
    ).toEqual(['ResourceRecovered Connector p/a: healthy again', 'RevisionApplied platform: revision r1 (fix) is applied and healthy']);
    // Another resource of the same name (another project, another kind) is not the one that was degraded.
    expect(
      reasons(
        runEvents(
          before,
          after({
            result: 'converged',
            converged: 'r1',
            resources: [row('a', 'in-sync', { project: 'q', health: 'healthy' }), row('a', 'in-sync', { yaml_kind: 'Transformation' })],
          }),
        ),
      ),
    ).toEqual([]);
    // A new revision's changes are the revision's, not drift.
    expect(
      reasons(
        runEvents(
          { ...before, revision: 'r0' },
          after({ result: 'converged', converged: 'r1', resources: [row('c', 'applied', { action: 'update', detail: 'update done' })] }),
        ),
      ),
    ).toEqual([]);
  });
});
