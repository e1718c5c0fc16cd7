import type { Logger } from 'pino';
import type { SuspensionStore } from './suspension.js';

/**
 * Whether reconciling is suspended, and its copy in the suspension store (suspension.ts), when
 * there is one: saves go out in order, one after the other; failures are logged, never fatal.
 */
export class SuspendSwitch {
  private saving: Promise<void> = Promise.resolve();
  /** Counts suspends and resumes: a load that one overtook keeps it rather than what it read. */
  private changes = 0;

  constructor(
    private suspended: boolean,
    private readonly store: SuspensionStore | undefined,
    private readonly log: Logger,
  ) {}

  get value(): boolean {
    return this.suspended;
  }

  /** A suspend or resume: saved even when unchanged here (the store may say otherwise: another replica wrote it). True when it changed. */
  set(value: boolean): boolean {
    this.changes++;
    this.save(value);
    if (this.suspended === value) return false;
    this.suspended = value;
    this.log.info({ suspended: value }, value ? 'reconciling suspended' : 'reconciling resumed');
    return true;
  }

  /** Stores `value` after the saves before it. */
  save(value: boolean): void {
    const store = this.store;
    if (!store) return;
    this.saving = this.saving
      .then(() => store.save(value))
      .catch((err: Error) =>
        this.log.error(
          { err: err.message, suspended: value, store: store.description },
          'saving the suspension failed: a restart or another leader may not keep it',
        ),
      );
  }

  /** Takes the stored value (a suspend or resume made meanwhile wins over what the load read). True when it changed. */
  async load(when: string): Promise<boolean> {
    const store = this.store;
    if (!store) return false;
    await this.saving;
    const changes = this.changes;
    let stored: boolean | undefined;
    try {
      stored = await store.load();
    } catch (err) {
      this.log.error({ err: (err as Error).message, store: store.description }, 'reading the stored suspension failed: keeping the current one');
      return false;
    }
    if (stored === undefined || stored === this.suspended || changes !== this.changes) return false;
    this.suspended = stored;
    this.log.info(
      { suspended: stored, when, store: store.description },
      stored ? 'reconciling suspended (stored suspension)' : 'reconciling resumed (stored suspension)',
    );
    return true;
  }

  /** Resolves once the saves made so far are done. */
  settled(): Promise<void> {
    return this.saving;
  }
}
