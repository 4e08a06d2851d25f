/**
 * One tick's whole decision, every lane: the primary's pipeline (pipeline.ts), then the overflow
 * lane sized against it (overflow.ts), then the status summary. `decideTick` returns it all, and
 * the state to persist with the overflow lane's and the status in it; nothing edits it afterwards.
 * Pure.
 */
import { decideOverflow, initialOverflowState, splitOverflowCeiling } from './overflow.js';
import { decide } from './pipeline.js';
import { governorStatusOf, overflowStatusOf } from './status.js';
import type {
  GovernorConfig,
  GovernorSignals,
  GovernorState,
  OverflowConfig,
  OverflowTickInput,
  TickDecision,
} from './types.js';

/** The overflow lane's part of a tick: its config, its signals and how its mappings are split. */
export interface OverflowTick extends OverflowTickInput {
  config: OverflowConfig;
}

/**
 * Decide every lane of this tick.
 * @param signals the primary's signals (its normal lane's in flight without the overflow lane's, see assembleSignals)
 * @param state what the previous tick persisted (initialState for the first)
 * @param overflow the overflow lane's inputs, when an overflow provider is configured
 */
export function decideTick(
  signals: GovernorSignals,
  state: GovernorState,
  config: GovernorConfig,
  overflow?: OverflowTick,
): TickDecision {
  const primary = decide(signals, state, config);
  const status = governorStatusOf(signals, primary);
  let lane: TickDecision['overflow'];
  let next: GovernorState = primary.state;
  if (overflow !== undefined) {
    const laneState = state.overflow ?? initialOverflowState(overflow.config, signals.now);
    const decision = decideOverflow(primary, signals, overflow.signals, laneState, overflow.config);
    const mappings = splitOverflowCeiling(decision, primary.paused, overflow.backlog, overflow.highMapping);
    lane = { decision, mappings, signals: overflow.signals };
    status.overflow = overflowStatusOf(decision, overflow.signals, overflow.config);
    next = { ...next, overflow: decision.state };
  }
  next = { ...next, lastDecision: status };
  return { primary: { ...primary, state: next }, ...(lane ? { overflow: lane } : {}), status, state: next };
}
