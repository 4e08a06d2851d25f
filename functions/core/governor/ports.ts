/**
 * What the governor loop needs from the outside world. The Lambda, the CLI and the local
 * runtime pass different implementations; the loop and decide() stay the same.
 */
import type { BalanceError, Decision, GovernorState, Lane } from './types.js';
import type { LaneSetting, MetricsWindow, QueueReading } from './signals.js';

/** Moves the lanes' ceilings (event source mappings in AWS, pollers locally). */
export interface LaneActuator {
  /** The ceilings and enabled flags as they stand. */
  read(): Promise<{ normal: LaneSetting; high?: LaneSetting }>;
  /**
   * Make the lanes match the decision; calls only what changed. Returns what it did, in words.
   * The parked design's actuator (functions/governor/lease-step.ts) gives the mappings the
   * decision's `submitters` and opens its `ceilings` as thread leases (and, for a held test,
   * `liftHold`, clears the shards' refusal hold-offs).
   */
  apply(decision: Pick<Decision, 'ceilings' | 'enabled' | 'submitters' | 'liftHold'>): Promise<{ changes: string[] }>;
  /**
   * A new invocation begins: forget what this process wrote before (another process may have
   * written since), so the next decision writes it all again.
   */
  forget?(): void;
}

/** Persists the state between ticks; `save` refuses when another writer got there first. */
export interface GovernorStateStore {
  load(): Promise<{ state: GovernorState; version: number } | undefined>;
  /** @returns the new version. @throws GovernorStateConflictError when `expectedVersion` is stale. */
  save(state: GovernorState, expectedVersion: number | undefined): Promise<number>;
}

/** Another governor wrote the state since this one read it: this tick must not act. */
export class GovernorStateConflictError extends Error {
  override readonly name = 'GovernorStateConflictError';
  constructor(
    readonly expectedVersion: number | undefined,
    options: { cause?: unknown } = {},
  ) {
    super(
      `governor state changed since version ${expectedVersion ?? '(none)'}: another governor is running; this tick does not act`,
      options,
    );
  }
}

export interface QueueReader {
  read(): Promise<{ normal: QueueReading; high?: QueueReading }>;
}

export interface MetricsReader {
  read(): Promise<MetricsWindow | undefined>;
}

export interface BalanceReader {
  read(): Promise<number | undefined>;
  /** Why the last read failed, when it did and the reader can tell (outage evidence, the account cause). */
  lastError?(): BalanceError | undefined;
}

export type LaneRecord<T> = { normal: T } & Partial<Record<Exclude<Lane, 'normal'>, T>>;
