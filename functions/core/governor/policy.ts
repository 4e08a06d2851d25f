/**
 * The governor's policy, as the Lambda, the local runtime, the CLI and the policy lab import it:
 * `decideTick` (every lane of one tick, tick.ts) over the pipeline of named stages (`decide`,
 * pipeline.ts). Pure: no I/O and no clock (time arrives as `signals.now`).
 *
 * While the account is healthy the ceiling stands at the FREE threads at once (plan − reserved −
 * threads others hold, from the thread ledger), divided by the tasks one invocation solves: on
 * Lambda an unused ceiling costs nothing, so it does not trail demand. Later stages pause, hold
 * or limit it, each with a reason code. See docs/governor.md.
 */
export { capFloor, carriedThreads, ceilingFor, minimumCeiling, planCap } from './capacity.js';
export { cloudWatchTiming, governorConfigFrom } from './config.js';
export { decide, PIPELINE, STAGES } from './pipeline.js';
export { initialState, migrateGovernorState } from './state.js';
export { decideTick, type OverflowTick } from './tick.js';
