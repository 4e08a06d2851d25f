/**
 * The `governor-overflow` policy: the real governor plus the real overflow policy
 * (decideOverflow) steering the simulator's overflow provider (lab/sim/overflow-lane.ts), fed
 * from the same queue as the primary. The bench fails when any run spends past a cap or starts
 * a solve under the provider's pause level.
 */
import {
  decideOverflow,
  laneTakeRate,
  withLaneTake,
  DEFAULT_OVERFLOW_PROBE_CEILING,
  overflowConfigFrom,
  initialOverflowState,
  type OverflowConfig,
  type OverflowState,
} from '../functions/core/governor/overflow.js';
import { cloudWatchTiming, decide, governorConfigFrom, initialState } from '../functions/core/governor/policy.js';
import type { GovernorState } from '../functions/core/governor/types.js';
import { resolveSettings, type FleetSettings } from '../functions/core/settings.js';
import { governorAction } from './policies.js';
import type { OverflowSpec } from './sim/overflow-lane.js';
import type { ControlAction, Policy, PolicyView } from './sim/types.js';

export { DEFAULT_OVERFLOW, type OverflowResult, type OverflowSpec } from './sim/overflow-lane.js';

/** The overflow policy's config for a trace's settings and the lab's provider. */
export function overflowConfigFor(settings: FleetSettings, spec: OverflowSpec): OverflowConfig {
  // The shipped mapping from settings to the policy's config (the provider's guards included).
  const config = overflowConfigFrom(
    resolveSettings({
      ...settings,
      overflow: {
        baseUrl: 'https://overflow.lab.invalid',
        capUsdPerHour: spec.capUsdPerHour,
        capUsdPerDay: spec.capUsdPerDay,
        priceHintUsd: spec.priceHintUsd,
        latencyTargetSeconds: spec.latencyTargetMs / 1000,
        maxConcurrency: spec.threads,
        probeCeiling: DEFAULT_OVERFLOW_PROBE_CEILING,
        // The fastest solve the lab's methods draw is well over a second; 2 s bounds it.
        minSolveSeconds: 2,
        haltBalance: spec.haltBalanceUsd,
        pauseBalance: spec.pauseBalanceUsd,
      },
    }),
    cloudWatchTiming(settings.tickMs),
  );
  if (config === undefined) throw new Error('the lab always configures an overflow provider');
  return config;
}

/** The governor with an overflow lane: the real decide() for the primary, decideOverflow() for the lane. */
export function governorOverflowPolicy(settings: FleetSettings, spec: OverflowSpec): Policy {
  const config = governorConfigFrom(settings, cloudWatchTiming(settings.tickMs));
  const overflowConfig = overflowConfigFor(settings, spec);
  let state: GovernorState | undefined;
  let overflowState: OverflowState | undefined;
  return {
    name: `governor-overflow $${spec.capUsdPerHour}/h`,
    capacity: 'lambda',
    periodSeconds: settings.tickMs / 1000,
    overflow: spec,
    // The primary parks in the parked design; the overflow lane always waits through its solves.
    parked: settings.solveMode === 'park',
    initialTarget: () => initialState(config, 0).ceilings.normal,
    tick(view: PolicyView): ControlAction {
      state ??= initialState(config, view.nowMs);
      overflowState ??= initialOverflowState(overflowConfig, view.nowMs);
      const lane = view.overflowLane;
      if (lane === undefined) throw new Error('governor-overflow runs only with an overflow lane');
      const laneSignals = lane.signals(view.nowMs, view.backlog);
      // The lab's queue reading leaves the lane out; the loop's assembleSignals counts its take the same way.
      const primarySignals = withLaneTake(view.governorSignals(), laneTakeRate(laneSignals, overflowState.lane));
      const decision = decide(primarySignals, state, config);
      state = decision.state;
      const overflow = decideOverflow(decision, primarySignals, laneSignals, overflowState, overflowConfig);
      overflowState = overflow.state;
      lane.set(overflow.enabled, overflow.ceiling, overflow.reason.code);
      return {
        ...governorAction(decision, settings),
        enabled: !decision.paused && decision.enabled.normal,
        reason: `${decision.reason.code}+${overflow.reason.code}`,
      };
    },
  };
}
