/**
 * The governor's side of the thread leases (the parked design, functions/core/thread-leases.ts):
 * the threads held are the leases' live slots (a parked task has no invocation, so the thread
 * ledger's own held count cannot see it); each decision's ceiling opens that many slots, shard by
 * shard, in the same step that moves the mappings. The decision itself is untouched: the same
 * ceilings, applied to one more resource.
 */
import type { LaneActuator } from '../core/governor/ports.js';
import type { Clock } from '../core/ports.js';
import { filledAcceptance, type LeaseKeeper, liveHeld, shardLimits, threadsOpened } from '../core/thread-leases.js';
import type { ThreadLedgerReader, ThreadLedgerRecorder } from '../core/thread-ledger.js';
import type { GovernorLog } from './loop.js';

/** The lane's leases as the governor sees them. */
export interface LeasedLane {
  leases: LeaseKeeper;
  shards: readonly string[];
  /** Threads the plan leaves the fleet (plan − reserved). */
  planCap: number;
  /** Threads one invocation holds in the waiting design (tasks per invocation): a ceiling's threads. */
  tasksPerInvocation: number;
}

/** The thread ledger's reading with `held` from the leases, and the held count it last saw. */
export interface LeasedLedgerReader extends ThreadLedgerReader {
  /** Threads held at the last read (0 before the first): what the governor's probe records its answers with. */
  lastHeld(): number;
}

/** What the leased reading takes beside the ledger and the lane. */
export interface LeasedReadingOptions {
  /** @default Date.now */
  clock?: Clock;
  /** Where a refusal hold-off that could not be cleared is logged. */
  log?: GovernorLog;
  /** The answers the watch freed and has not yet added to the ledger (ParkedWatch.answersUncounted). @default none */
  uncounted?: () => number;
}

/**
 * The thread ledger's reading with `held` counted from the leases (and no leftovers: a parked
 * task's thread is its lease). Acceptances and refusals are the ledger's own. Unreadable leases
 * make the whole reading unknown this tick (never zero). A shard's refusal hold-off that an
 * acceptance has since answered (the ledger's newest acceptance is later) is cleared, as a
 * consumer's own acceptance lifts the waiting design's (`roomLimit`): the governor's probe is
 * the one submission made while every consumer holds off. `solved` also counts the answers the
 * watch freed and has not yet added to the ledger (`uncounted`: ParkedWatch.answersUncounted):
 * charged when they became ready, their leases freed, they are in neither count otherwise.
 */
export function leasedLedgerReader(
  ledger: ThreadLedgerReader | undefined,
  lane: LeasedLane,
  options: LeasedReadingOptions = {},
): LeasedLedgerReader {
  const { clock = Date.now, log, uncounted = () => 0 } = options;
  let lastHeld = 0;
  let seenAcceptances: number | undefined;
  return {
    lastHeld: () => lastHeld,
    async read() {
      const [reading, views] = await Promise.all([ledger?.read(), lane.leases.views(lane.shards)]);
      const now = clock();
      const held = liveHeld(views, now);
      lastHeld = held;
      const acceptedAt = reading?.lastAcceptance?.at;
      if (acceptedAt !== undefined) {
        const answered = views.filter((view) => view.meta?.refusedAt !== undefined && view.meta.refusedAt < acceptedAt);
        await clearHoldOffs(
          lane.leases,
          answered.map((view) => view.shard),
          acceptedAt,
          log,
        );
      }
      const { leftover: _leftover, ...rest } = reading ?? { refusals: 0, acceptances: 0, held: 0 };
      const fresh = seenAcceptances !== undefined && rest.acceptances > seenAcceptances;
      if (reading !== undefined) seenAcceptances = rest.acceptances;
      const freed = uncounted();
      const solved = freed > 0 ? { solved: (rest.solved ?? 0) + freed } : {};
      return { ...rest, held, ...solved, ...filledAcceptance(rest, held, fresh) };
    },
  };
}

/**
 * The governor probe's ledger in the parked design: its acceptance and refusal recorded with the
 * threads the leases held at the last read (the ledger's own held buckets are not the count).
 */
export function leasedProbeLedger(ledger: ThreadLedgerRecorder, held: () => number): ThreadLedgerRecorder {
  return {
    accepted: async (now) => {
      await ledger.recordEvent('acceptance', now, held());
      return { bucket: Number.NaN };
    },
    refused: async (now) => {
      const atRefusal = held();
      await ledger.recordEvent('refusal', now, atRefusal);
      return atRefusal;
    },
    released: async () => undefined,
    leftOver: async () => undefined,
    leftoverAnswered: async () => undefined,
    recordEvent: (event, at, count) => ledger.recordEvent(event, at, count),
    read: () => ledger.read(),
  };
}

/**
 * The parked design's actuator: the mappings take the decision's submitters (the invocations
 * that submit and park), and its thread ceilings open as lease slots, shard by shard, written
 * only when they change (the first decision of an invocation writes them all), with the lanes'
 * ceilings on the first shard. Mappings first (their failure fails the tick, as before); a
 * failed limit write is logged and retried on the next tick: the shards keep their last limits
 * meanwhile (fail static). `read()` gives the lanes as the policy knows them: their thread
 * ceilings from the first shard (the mappings show the submitters), or the last known while the
 * leases cannot be read (a DynamoDB outage must not fail the tick that pauses for it), their
 * states from the mappings.
 */
export function withLeaseLimits(
  actuator: LaneActuator,
  lane: LeasedLane,
  log?: GovernorLog,
  clock: Clock = Date.now,
): LaneActuator {
  let written: { limits: number[]; lanes: string } | undefined;
  /** The lanes' thread ceilings as last read or written: the leases' table may be the store that is down. */
  let known: { normal: number; high: number } | undefined;
  return {
    forget() {
      // Another environment's governor may have written the shards since this one last did (two
      // warm environments take alternate minutes): a limit "unchanged" from this one's last write
      // was not written, and a paused fleet kept the other's open slots for a minute.
      written = undefined;
      actuator.forget?.();
    },
    async read() {
      const [mappings, first] = await Promise.all([
        actuator.read(),
        lane.leases.views(lane.shards.slice(0, 1)).then(
          ([view]) => view,
          () => undefined,
        ),
      ]);
      const lanes = first?.meta?.lanes ?? known;
      if (lanes === undefined) return mappings;
      known = lanes;
      return {
        normal: { ...mappings.normal, ceiling: lanes.normal },
        ...(mappings.high ? { high: { ...mappings.high, ceiling: lanes.high } } : {}),
      };
    },
    async apply(decision) {
      const result = await actuator.apply({
        ceilings: decision.submitters ?? decision.ceilings,
        enabled: decision.enabled,
      });
      // A held test: the shards' own refusal hold-offs go with the ledger's hold (the loop lifts it
      // after this), so the invocation opened now is taken. The leased reader clears a shard's
      // once a later acceptance shows, which a test waits for; this clears any left, all of them up
      // to now: a consumer writes its refusal into its shard after the ledger's (a read of every
      // shard later), so an acceptance between the two leaves the shard's standing. A refusal
      // newer than the lift still holds the fleet through the ledger.
      if (decision.liftHold !== undefined) await clearHoldOffs(lane.leases, lane.shards, clock(), log);
      const limits = shardLimits(threadsOpened(decision, lane), lane.planCap);
      const lanes = { normal: decision.ceilings.normal, high: decision.ceilings.high };
      known = lanes;
      const changes = [...result.changes];
      const next = written ? [...written.limits] : limits.map(() => Number.NaN);
      const lanesChanged = written?.lanes !== JSON.stringify(lanes);
      let wroteLanes = !lanesChanged;
      for (const [i, limit] of limits.entries()) {
        const withLanes = i === 0 && lanesChanged;
        if (next[i] === limit && !withLanes) continue;
        try {
          await lane.leases.setLimit(lane.shards[i] as string, limit, withLanes ? { lanes } : {});
          next[i] = limit;
          if (withLanes) wroteLanes = true;
          changes.push(`leases ${lane.shards[i]}: ${limit} slot(s)`);
        } catch (error) {
          log?.warn('lease limit not written; the shard keeps its last limit until the next tick', {
            shard: lane.shards[i],
            limit,
            error: `${(error as Error).name}: ${(error as Error).message}`,
          });
        }
      }
      written = { limits: next, lanes: wroteLanes ? JSON.stringify(lanes) : (written?.lanes ?? '') };
      return { changes };
    },
  };
}

/** Clear the refusal hold-offs of `shards` of refusals before `before` (a newer one stands); a failure is logged. */
async function clearHoldOffs(
  leases: Pick<LeaseKeeper, 'clearRefusal'>,
  shards: readonly string[],
  before: number,
  log?: GovernorLog,
): Promise<void> {
  for (const shard of shards)
    await leases
      .clearRefusal(shard, before)
      .catch((error: unknown) =>
        log?.warn('refusal hold-off not cleared; it lapses by itself', { error: (error as Error).message }),
      );
}
