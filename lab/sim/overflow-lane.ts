/**
 * The overflow provider inside the simulator: a pay-per-solve provider with its own solve-time
 * factor, thread cap, balance and per-solve price, fed from the same queue as the primary. The
 * lane checks the caps itself: every solve's charge is summed per UTC hour and UTC day by the
 * lane (not by the policy), and a charge that takes either sum past its cap is counted in
 * `capBreaches`. It also counts the solves it started under its own pause level, and its lowest
 * balance. The provider is another service than the primary: the trace's outages do not reach
 * it, its balance reads always answer, and it has no errors.
 */
import type { OverflowReasonCode } from '../../functions/core/governor/overflow.js';
import type { GovernorSignals } from '../../functions/core/governor/types.js';
import { MAPPING_MIN_CONCURRENCY } from '../../functions/core/settings.js';

const HOUR_S = 3600;
const DAY_S = 24 * HOUR_S;

/** The overflow provider the lab models, and the caps the policy gets. */
export interface OverflowSpec {
  /** What one solve really costs, USD (the policy learns it; it is told only `priceHintUsd`). */
  pricePerSolveUsd: number;
  /** The price the policy assumes until it learns one, USD. */
  priceHintUsd: number;
  /** Its solve times relative to the primary's (the same task draws). */
  solveFactor: number;
  /** Threads the provider serves this account at once. */
  threads: number;
  initialBalanceUsd: number;
  /** The provider's guard levels: no scale-up under the halt level, the lane closed under the pause level. */
  haltBalanceUsd: number;
  pauseBalanceUsd: number;
  capUsdPerHour: number;
  capUsdPerDay: number;
  /** p95 queue-wait target, ms. */
  latencyTargetMs: number;
}

/** The lab's default provider: $2.99 per 1000 solves, the primary's solve times, 100 threads. */
export const DEFAULT_OVERFLOW: Readonly<OverflowSpec> = {
  pricePerSolveUsd: 0.00299,
  priceHintUsd: 0.003,
  solveFactor: 1,
  threads: 100,
  initialBalanceUsd: 100,
  haltBalanceUsd: 2,
  pauseBalanceUsd: 1,
  capUsdPerHour: 2,
  capUsdPerDay: 20,
  latencyTargetMs: 30_000,
};

/** What the overflow lane did in one run. */
export interface OverflowResult {
  capUsdPerHour: number;
  capUsdPerDay: number;
  solved: number;
  spentUsd: number;
  worstHourUsd: number;
  worstDayUsd: number;
  /** Charges that took an hour's or a day's sum past its cap (must be 0). */
  capBreaches: number;
  /** Ticks the lane was open. */
  openTicks: number;
  /** Changes the lane's mapping would have been sent (an opening, a closing, a new ceiling while open). */
  mappingUpdates: number;
  /** Ticks per overflow reason code (why the lane stood where it did). */
  reasons: Partial<Record<OverflowReasonCode, number>>;
  /** Ticks the provider's own guard kept the lane closed (its pause; a halt only holds it open). */
  guardClosedTicks: number;
  /** The provider's balance at its lowest, USD, and solves started while it was under the pause level (must be 0). */
  lowestBalanceUsd: number;
  startedPastPause: number;
  /** Seconds the lane's invocations ran (each task one invocation: its overhead and its solve), for the Lambda bill. */
  invocationSeconds: number;
}

/** The overflow lane inside the simulator: its ceiling, its in-flight solves, its money. */
export class OverflowLane {
  busy = 0;
  ceiling = MAPPING_MIN_CONCURRENCY;
  enabled = false;
  balance: number;
  solved = 0;
  private solvesSinceRead = 0;
  private spent = 0;
  private readonly perWindow = new Map<string, number>();
  private breaches = 0;
  private openTicks = 0;
  private mappingUpdates = 0;
  private readonly reasons: Partial<Record<OverflowReasonCode, number>> = {};
  private guardClosedTicks = 0;
  private startedPastPause = 0;
  private solveSeconds: number[] = [];
  private invocationSeconds = 0;

  constructor(readonly spec: OverflowSpec) {
    this.balance = spec.initialBalanceUsd;
  }

  /** Whether the lane may take one more task now. */
  hasRoom(): boolean {
    return this.enabled && this.busy < Math.min(this.ceiling, this.spec.threads);
  }

  /** Takes a task with the primary's solve draw `solveSeconds`; returns how long until it is done. */
  start(solveSeconds: number, overheadSeconds: number): number {
    this.busy++;
    if (this.balance < this.spec.pauseBalanceUsd) this.startedPastPause++;
    const hold = solveSeconds * this.spec.solveFactor;
    this.solveSeconds.push(hold);
    if (this.solveSeconds.length > 200) this.solveSeconds.shift();
    this.invocationSeconds += overheadSeconds + hold;
    return overheadSeconds + hold;
  }

  /** A solve ends at `t` (seconds): charged, and checked against the caps. */
  finish(t: number): void {
    this.busy--;
    this.solved++;
    this.solvesSinceRead++;
    const price = this.spec.pricePerSolveUsd;
    this.balance -= price;
    this.spent += price;
    const windows: [string, number][] = [
      [`h${Math.floor(t / HOUR_S)}`, this.spec.capUsdPerHour],
      [`d${Math.floor(t / DAY_S)}`, this.spec.capUsdPerDay],
    ];
    for (const [key, cap] of windows) {
      const sum = (this.perWindow.get(key) ?? 0) + price;
      this.perWindow.set(key, sum);
      if (sum > cap + 1e-9) this.breaches++;
    }
  }

  /** The provider's signals for the overflow policy (the lab's provider has no errors or outages). */
  signals(nowMs: number, backlog: number) {
    const mean =
      this.solveSeconds.length === 0
        ? undefined
        : (this.solveSeconds.reduce((sum, s) => sum + s, 0) / this.solveSeconds.length) * 1000;
    const provider: GovernorSignals = {
      now: nowMs,
      lanes: {
        normal: {
          backlog,
          inFlight: this.busy,
          delayed: 0,
          oldestAgeSeconds: 0,
          arrivalRate: 0,
          ceiling: this.ceiling,
          enabled: this.enabled,
        },
      },
      completionRate: undefined,
      meanSolveMs: mean,
      p95SolveMs: undefined,
      errorRate: 0,
      transientErrorRate: 0,
      overCapRate: 0,
      overCapAnswers: 0,
      accountErrors: 0,
      accountErrorCode: undefined,
      balance: Math.max(0, this.balance),
    };
    const solvesSinceLastRead = this.solvesSinceRead;
    this.solvesSinceRead = 0;
    return { provider, solvesSinceLastRead };
  }

  /** The policy's decision for this tick. */
  set(enabled: boolean, ceiling: number, reason: OverflowReasonCode): void {
    // What the governor's actuator would send: one UpdateEventSourceMapping when either changes.
    if (enabled !== this.enabled || (enabled && ceiling !== this.ceiling)) this.mappingUpdates++;
    this.enabled = enabled;
    this.ceiling = ceiling;
    if (enabled) this.openTicks++;
    else if (reason === 'OVERFLOW_GUARD') this.guardClosedTicks++;
    this.reasons[reason] = (this.reasons[reason] ?? 0) + 1;
  }

  result(): OverflowResult {
    let worstHourUsd = 0;
    let worstDayUsd = 0;
    for (const [key, usd] of this.perWindow) {
      if (key.startsWith('h')) worstHourUsd = Math.max(worstHourUsd, usd);
      else worstDayUsd = Math.max(worstDayUsd, usd);
    }
    return {
      capUsdPerHour: this.spec.capUsdPerHour,
      capUsdPerDay: this.spec.capUsdPerDay,
      solved: this.solved,
      spentUsd: this.spent,
      worstHourUsd,
      worstDayUsd,
      capBreaches: this.breaches,
      openTicks: this.openTicks,
      mappingUpdates: this.mappingUpdates,
      reasons: { ...this.reasons },
      guardClosedTicks: this.guardClosedTicks,
      // Nothing tops the lab's account up: its balance only falls, so the last is the lowest.
      lowestBalanceUsd: this.balance,
      startedPastPause: this.startedPastPause,
      invocationSeconds: this.invocationSeconds,
    };
  }
}
