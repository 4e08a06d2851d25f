/**
 * The governor's persisted state: the first tick's state, and the migration of a state item
 * written by an older release (twenty flat fields) into the grouped shape. Pure.
 */
import { MAPPING_MIN_CONCURRENCY } from '../settings.js';
import { capFloor, ceilingFor, planCap } from './capacity.js';
import type { GovernorConfig, GovernorState, GovernorStatus, Lane, NeighbourEstimate, PauseReason } from './types.js';

/** The state before the first tick: the full plan, ceilings at the free threads. */
export function initialState(config: GovernorConfig, now: number): GovernorState {
  const effectiveCap = Math.max(capFloor(config), planCap(config));
  return {
    ceilings: { normal: ceilingFor(effectiveCap, config), high: MAPPING_MIN_CONCURRENCY },
    lastChangeAt: now,
    probe: { lastAt: now },
    overCap: { effectiveCap },
    spend: {},
    availability: {},
  };
}

/** The flat state items written before the state was grouped by concern (read-only here). */
export interface LegacyGovernorState {
  effectiveCap: number;
  lastChangeAt: number;
  lastProbeAt: number;
  pausedReason?: string;
  pausedSince?: number;
  outageTicks?: number;
  ceilings: Record<Lane, number>;
  lastShrinkAt?: number;
  probeCeiling?: number;
  probeReason?: 'outage' | 'resume';
  resumedAt?: number;
  recentUse?: { at: number; threads: number }[];
  provenThreads?: number;
  refusedThreads?: number;
  unprovenProbeAt?: number;
  probeBackoff?: number;
  failedProbeCap?: number;
  haltCeiling?: number;
  balanceSeen?: { at: number; usd: number };
  spendPerSecond?: number;
  lastDecision?: GovernorStatus;
}

/** Whether a stored state is the older flat shape (it has `effectiveCap` at the top and no groups). */
export function isLegacyGovernorState(stored: unknown): stored is LegacyGovernorState {
  return (
    typeof stored === 'object' &&
    stored !== null &&
    typeof (stored as { effectiveCap?: unknown }).effectiveCap === 'number' &&
    (stored as { overCap?: unknown }).overCap === undefined
  );
}

/**
 * A stored state in the current shape. A state in the older flat shape is migrated field by
 * field (a pause other than `balance` was the slow-probe pause for key and IP troubles, so it
 * becomes `account`); a grouped state of the previous release (an `outage` counter, an outage
 * pause with its probe time, a neighbour estimate of bounds, the metric window's over-cap fields)
 * keeps what still means something. The next save writes the current shape.
 */
export function migrateGovernorState(stored: GovernorState | LegacyGovernorState): GovernorState {
  if (!isLegacyGovernorState(stored)) return currentShape(stored);
  const old = stored;
  const pauseReason: PauseReason | undefined =
    old.pausedReason === undefined ? undefined : old.pausedReason === 'balance' ? 'balance' : 'account';
  return dropUndefined({
    ceilings: old.ceilings,
    lastChangeAt: old.lastChangeAt,
    pause: pauseReason === undefined ? undefined : { reason: pauseReason, since: old.pausedSince ?? old.lastChangeAt },
    resumedAt: old.resumedAt,
    probe: dropUndefined({
      lastAt: old.lastProbeAt,
      recovery:
        old.probeCeiling === undefined || old.probeReason === 'outage'
          ? undefined
          : { ceiling: old.probeCeiling, reason: 'resume' as const },
    }),
    overCap: { effectiveCap: old.effectiveCap },
    spend: dropUndefined({ lastRead: old.balanceSeen, perSecond: old.spendPerSecond, haltCeiling: old.haltCeiling }),
    availability: { solver: { ticks: old.outageTicks ?? 0 } },
    lastDecision: old.lastDecision,
  });
}

/** The previous grouped shape's fields, as a stored item may still carry them. */
interface PreviousShape {
  outage?: { ticks?: number };
  availability?: GovernorState['availability'];
  overCap: GovernorState['overCap'] & { neighbours?: Partial<NeighbourEstimate> & { lower?: number } };
  probe: GovernorState['probe'] & { recovery?: { ceiling: number; reason: string } };
}

function currentShape(stored: GovernorState): GovernorState {
  const s = stored as GovernorState & PreviousShape;
  const neighbours = s.overCap.neighbours;
  const estimate =
    neighbours !== undefined && typeof neighbours.free === 'number'
      ? (neighbours as NeighbourEstimate)
      : neighbours === undefined
        ? undefined
        : {
            free: s.overCap.effectiveCap,
            step: 1,
            budget: 0,
            seen: neighbours.seen ?? { refusals: 0, acceptances: 0 },
            updatedAt: neighbours.updatedAt ?? s.lastChangeAt,
          };
  const recovery = s.probe.recovery?.reason === 'resume' ? s.probe.recovery : undefined;
  const { outage: _outage, ...rest } = s;
  return dropUndefined({
    ...rest,
    // The overflow provider's guards are a governor state of their own, saved in the same shapes.
    overflow:
      s.overflow === undefined ? undefined : { ...s.overflow, provider: migrateGovernorState(s.overflow.provider) },
    spend: s.spend === undefined ? undefined : spendShape(s.spend),
    probe: dropUndefined({ lastAt: s.probe.lastAt, recovery: recovery as GovernorState['probe']['recovery'] }),
    overCap: dropUndefined({
      effectiveCap: s.overCap.effectiveCap,
      neighbours: estimate,
      probeCredit: s.overCap.probeCredit,
    }),
    availability: s.availability ?? { solver: { ticks: s.outage?.ticks ?? 0 } },
  }) as GovernorState;
}

/** The spend group, its refused reads once a bare count (read as of no time: the next refused read restarts them). */
function spendShape(spend: GovernorState['spend'] & { refusedReads?: unknown }): GovernorState['spend'] {
  const reads = spend.refusedReads;
  return typeof reads === 'number' ? { ...spend, refusedReads: { count: reads, at: 0 } } : spend;
}

/** The object without its undefined fields (as DynamoDB stores it), so a migrated state compares equal to a saved one. */
function dropUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}
