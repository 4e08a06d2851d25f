/**
 * Thread leases: how the fleet holds the solver's thread cap when its consumers do not wait
 * through their solves (the parked design, docs/consumer.md "Parking"). A consumer takes a lease
 * before it submits and parks the task (its message hidden, its invocation ended); the governor,
 * whose invocation runs all minute, polls every parked submission and frees the lease when the
 * solver answers. A lease is a slot: one item per thread, taken with a conditional write, so two
 * consumers never hold one slot and no more slots are taken than the governor opened. A crashed
 * holder cannot keep one past `until` (the solve's deadline): an expired slot is free again.
 *
 * Slots live in shards of at most {@link LEASE_SHARD_SLOTS} (one DynamoDB partition each, read
 * with one Query); the governor sets each shard's `limit` from its ceiling every tick, split so
 * that a lower ceiling never raises a shard's limit (the cap holds while limits move). Pure: the
 * DynamoDB adapter is functions/adapters/thread-leases.ts.
 */
import { strongReadUnits } from './cost/bill.js';
import type { Decision } from './governor/types.js';
import type { DeliveredMessage } from './ports.js';
import type { FleetSettings } from './settings.js';
import { REFUSAL_HOLD_OFF_MS, roomLimit, type ThreadLedgerReading } from './thread-ledger.js';

/** Slots of one shard at most: one Query reads a shard (about 35 KB). */
export const LEASE_SHARD_SLOTS = 64;

/**
 * The first slot index of the governor's probe submissions (functions/governor/thread-probe.ts),
 * in the lane's first shard: past every index a consumer takes (below a shard's limit, at most
 * LEASE_SHARD_SLOTS), so a probe never races a consumer for a slot, and its live lease counts in
 * the shard's held slots like any other. An accepted probe holds a thread of the plan until the
 * solver answers it; before its lease, the parked design counted none for it, and the fleet's
 * next submission was refused on the thread its own probe held (on a plan others leave one
 * thread of, every probe the solver accepted spent that thread on a synthetic task).
 */
export const PROBE_SLOT_BASE = 1_000_000;

/** Probe leases at most, one per probe in flight (PROBE_SLOT_BASE onwards): two accepted probes prove the mapping's floor free. */
export const PROBE_SLOTS = 2;

/**
 * The governor's watch (functions/governor/parked-watch.ts) asks the solver about every parked
 * submission in a round, at most this often, ms. A freed lease waits for the round after its
 * answer, half the round on average; while every open slot is held that wait is a paid thread
 * no task uses, so the rounds are as fast as the solver requests they cost allow
 * ({@link watchPollMs}).
 */
export const WATCH_POLL_MS = 100;

/** …and at least this often, ms, however many requests a round takes. */
export const WATCH_POLL_MAX_MS = 500;

/**
 * From a parked solve's answer ready at the solver to its lease freed and taken again, ms, at
 * most: the watch's round after it (`WATCH_POLL_MAX_MS` apart at most), that round's request, and a
 * consumer's take. Through it the solver has the thread back while the leases still count it.
 */
export const LEASE_FREEING_LAG_MS = 2 * WATCH_POLL_MAX_MS;

/**
 * Solver requests a second the watch's rounds spend at most while they can keep to
 * WATCH_POLL_MAX_MS, for up to 50 submissions asked about…
 */
export const WATCH_POLL_REQUESTS_PER_SECOND = 10;

/**
 * …and for more, one request a second per this many seconds of each submission asked about: the
 * providers' own polling, each submission every 5 s (2captcha: "if captcha is not solved yet,
 * retry in 5 seconds"; CaptchaAI: "recommended: every 5 seconds per task"), so the watch never
 * asks more often than a client following that guidance on the same submissions would. Ten a
 * second is that rate for 50; a budget that stayed at ten slowed the rounds of a plan of
 * hundreds of parked submissions to 500 ms, and on short solves a sixth of its threads waited
 * for the round after their answer.
 */
export const PROVIDER_POLL_SECONDS = 5;

/**
 * Time between the watch's rounds when a round takes `requests` solver requests (one bulk
 * res.php request per 100 parked ids; one getTaskResult per id where the protocol has no bulk
 * call) for `asked` submissions, ms: at most ten requests a second, or one per submission per
 * PROVIDER_POLL_SECONDS when that is more (so res.php's rounds keep to 100 ms at any size:
 * ⌈n / 100⌉ requests ten times a second is at most n / 5 from 50 ids on), never slower than
 * WATCH_POLL_MAX_MS (the cadence before this budget, two rounds a second, whatever they cost).
 */
export function watchPollMs(requests: number, asked = 0): number {
  const perSecond = Math.max(WATCH_POLL_REQUESTS_PER_SECOND, asked / PROVIDER_POLL_SECONDS);
  const budgeted = (Math.max(1, Math.ceil(requests)) * 1000) / perSecond;
  return Math.min(WATCH_POLL_MAX_MS, Math.max(WATCH_POLL_MS, budgeted));
}

/**
 * The watch's batches (its solved count, its deletes, its solves' metric window and metrics):
 * written when the oldest has waited this long, ms, and at the end of its run. A batch that waits
 * costs nothing but freshness: the price per solve and the metric window are read once a minute,
 * a recorded task's message is hidden until its lease ends.
 */
export const WATCH_BATCH_MS = 10_000;

/** …and reads the leases (one strongly consistent Query a shard) at most this often, ms. */
export const WATCH_VIEW_MS = 1_000;

/**
 * A consumer waiting for a slot reads the shards this often (×0.5–1.5 jitter) when a round reads
 * a full shard, ms: it takes a freed slot about half of this after the watch freed it. Much
 * faster than the thread ledger's waits (`overCapWaiting.pollMs`): in the parked design a slot
 * stands for a thread the plan is paid for, and its reads are eventually consistent Queries at
 * half a read unit per 4 KB. A round that reads less reads more often ({@link leaseWaitPollMs}).
 */
export const LEASE_WAIT_POLL_MS = 250;

/** …but never more often than this, ms (a Query's own round trip is a few ms). */
export const LEASE_WAIT_MIN_POLL_MS = 50;

/**
 * A slot item as the consumer writes it (shard, slot, task id, times, the delivery's queue ARN
 * and receipt handle, message id), bytes: the receipt handle is most of it.
 */
export const LEASE_SLOT_ITEM_BYTES = 550;

/** A shard's meta item (limit, refusal hold-off, the lanes' ceilings), bytes. */
export const LEASE_META_ITEM_BYTES = 150;

/**
 * Read units of one Query of a shard holding `items` slot items (live or expired: a Query reads
 * every item of the partition) and its meta: one per 4 KB read, half that eventually consistent.
 */
export function shardQueryReadUnits(items: number, consistent: boolean): number {
  const units = strongReadUnits(LEASE_META_ITEM_BYTES + Math.max(0, items) * LEASE_SLOT_ITEM_BYTES);
  return consistent ? units : units / 2;
}

/** …and never less often than this, ms: a plan of over 40 full shards (2 560 threads) reads more. */
export const LEASE_WAIT_MAX_POLL_MS = 10_000;

/**
 * A waiting consumer's time between its rounds over the shards, ms, when its last round read
 * `itemsRead` slot items in each shard it read: the read units a waiting consumer spends a second
 * are held at those of a full shard read every `pollMs` (LEASE_WAIT_POLL_MS), so a round that
 * reads less — a small plan's shard of a few slots is one 4 KB page — comes round sooner, down
 * to LEASE_WAIT_MIN_POLL_MS, and a round over several shards later, up to LEASE_WAIT_MAX_POLL_MS.
 * On a plan of a few threads a freed slot waited half of 250 ms for its next submission, a paid
 * thread idle for each task; there the same spend reads every 50 ms. A round over 16 full shards
 * (a 1 000-thread plan) came every 250 ms too, 16 times the read units of each waiting consumer,
 * and a plan's waiting consumers grow with it: 80 shard reads a task on a surge at 1 000 threads,
 * 9 at 100, the table past its on-demand start (12 000 read units a second). A big plan has as many
 * waiting consumers as slots free (submitters.ts), so a freed slot is still found within tens of ms.
 */
export function leaseWaitPollMs(itemsRead: readonly number[], pollMs: number = LEASE_WAIT_POLL_MS): number {
  const full = shardQueryReadUnits(LEASE_SHARD_SLOTS, false);
  const round = itemsRead.reduce((sum, items) => sum + shardQueryReadUnits(items, false), 0);
  if (round <= 0) return pollMs;
  const floor = Math.min(pollMs, LEASE_WAIT_MIN_POLL_MS);
  return Math.min(Math.max(pollMs, LEASE_WAIT_MAX_POLL_MS), Math.max(floor, (pollMs * round) / full));
}

/** A taken slot: a thread the fleet holds for one task, until its answer or its deadline. */
export interface LeaseSlot {
  /** The shard's key (`<lane>#<n>`). */
  shard: string;
  /** Index within the shard, 0-based. */
  slot: number;
  taskId: string;
  /** Epoch ms the lease was taken. */
  takenAt: number;
  /** Epoch ms the lease ends whatever happens: the solve's deadline. Past it the slot is free. */
  until: number;
  /**
   * The delivery that took the lease (its queue and receipt handle): once it has parked the task
   * (the record holds the submission's id and no live claim), the governor makes that message
   * visible again when the answer is ready.
   */
  delivery: DeliveredMessage;
}

/** A shard's own settings and its refusal hold-off, as one item beside its slots. */
export interface ShardMeta {
  /** Slots the governor opened in this shard (its share of the ceiling); absent until it set one. */
  limit?: number;
  /** The newest over-cap refusal in this shard: at, and the slots held then (not counting the refused one). */
  refusedAt?: number;
  refusedHeld?: number;
  /** Over-cap refusals recorded in this shard (a counter). */
  refusals?: number;
  /**
   * The lanes' thread ceilings the governor last opened (on the first shard only): the mappings
   * carry the submitters in the parked design, so the ceilings as they stand are read here.
   */
  lanes?: { normal: number; high: number };
}

/** One read of a shard: its meta (absent until the governor wrote one) and its taken slots. */
export interface ShardView {
  shard: string;
  meta: ShardMeta | undefined;
  slots: LeaseSlot[];
}

/**
 * How long a lease lasts, ms: the consumer's function timeout (the solve's deadline and the
 * margin to record it, or less where the timeout was set lower), as long as an invocation that
 * waits through its solve could hold the thread. A crashed holder cannot keep a thread past it,
 * and a parked task's message comes back no later.
 */
export function leaseLengthMs(settings: Pick<FleetSettings, 'functionTimeoutSeconds'>): number {
  return settings.functionTimeoutSeconds * 1000;
}

/**
 * A parked submission the solver has not answered for (still solving, or its poll unanswered: an
 * outage, a transient error) still holds its solver thread: a long solve runs on, a solve the
 * solver paused resumes when it is back. Its lease (and its message's hiding) is renewed for a
 * whole lease once it ends within this many ms, so the thread stays counted until the solver
 * answers; a solve that outlived its lease would let a new submission go over the plan. A governor that
 * stops renewing (its end, a crash) leaves the lease to end by itself as before. Half a lease, at
 * most a minute: more than the seconds between two governor invocations, so no lease ends
 * unrenewed while its watch is away.
 */
export function renewWithinMs(leaseMs: number): number {
  return Math.min(leaseMs / 2, 60_000);
}

/**
 * The threads a decision opens as slots: its enabled lanes' ceilings, each invocation's tasks,
 * within the plan (a paused decision opens none).
 */
export function threadsOpened(
  decision: Pick<Decision, 'ceilings' | 'enabled'>,
  lane: { planCap: number; tasksPerInvocation: number },
): number {
  const invocations =
    (decision.enabled.normal ? decision.ceilings.normal : 0) +
    (decision.enabled.high ? (decision.ceilings.high ?? 0) : 0);
  return Math.min(lane.planCap, invocations * lane.tasksPerInvocation);
}

/** The shard keys of a lane for a plan of `planCap` usable threads. */
export function shardKeys(lane: string, planCap: number): string[] {
  const count = Math.max(1, Math.ceil(planCap / LEASE_SHARD_SLOTS));
  return Array.from({ length: count }, (_, i) => `${lane}#${i}`);
}

/** Slots a shard can hold at most: its share of the plan. */
export function shardCapacity(planCap: number, index: number): number {
  return splitEvenly(Math.max(0, planCap), shardKeys('x', planCap).length)[index] ?? 0;
}

/**
 * Each shard's limit for a fleet ceiling of `ceiling` threads: the ceiling spread evenly over the
 * shards, the remainder to the first ones. Monotone: a lower ceiling lowers or keeps every
 * shard's limit, so moving limits never lets the shards together hold more than the larger of
 * what they held and the new ceiling.
 */
export function shardLimits(ceiling: number, planCap: number): number[] {
  const shards = shardKeys('x', planCap).length;
  return splitEvenly(Math.max(0, Math.min(ceiling, planCap)), shards);
}

function splitEvenly(total: number, parts: number): number[] {
  const base = Math.floor(total / parts);
  const extra = total - base * parts;
  return Array.from({ length: parts }, (_, i) => base + (i < extra ? 1 : 0));
}

/**
 * The fleet's held threads as one delivery saw them, its own not counted: `others` live slots
 * beside its own in the shard it took from, scaled to the lane's `shards`. The takes start at a
 * random shard, so the shards fill alike: with its own slot the fleet holds about
 * `(others + 1) × shards`. (Scaling `others` alone would read a fleet whose every shard is full
 * as `shards − 1` threads short of it, and the governor's estimate of its free threads would
 * never see it filled, so never climb back after a refusal.)
 */
export function fleetHeldOf(others: number, shards: number): number {
  return shards <= 1 ? others : (others + 1) * shards - 1;
}

/**
 * The fleet's held threads as a delivery records them (`fleetHeldOf`), when it took its slot under
 * the fleet-wide refusal room `room` (`fleetRoomOf` at the take; undefined when none was in force):
 * the shards' shares of the room (`fleetRoomFull`) hold every live slot, its own included, so the
 * others are at most `room − 1`, whatever the scaled count of its shard reads. (A scaled count at
 * the room or above would read as the fleet filling the refused level, lift the room at once and
 * test the level again; before the shares, no taker could record it.)
 */
export function fleetHeldUnder(others: number, shards: number, room: number | undefined): number {
  const scaled = fleetHeldOf(others, shards);
  return room === undefined ? scaled : Math.min(scaled, Math.max(0, room - 1));
}

/**
 * The live slots over every shard of a lane at `now`: the threads the fleet holds, as the governor
 * reads them each tick and a refused delivery counts them (without `except`, its own slot).
 */
export function liveHeld(views: readonly ShardView[], now: number, except?: Pick<LeaseSlot, 'shard' | 'slot'>): number {
  let held = 0;
  for (const view of views)
    for (const slot of liveSlots(view, now)) if (except?.shard !== slot.shard || except.slot !== slot.slot) held += 1;
  return held;
}

/** Slots of a view still held at `now` (an expired lease holds nothing). */
export function liveSlots(view: ShardView, now: number): LeaseSlot[] {
  return view.slots.filter((slot) => slot.until > now);
}

/**
 * The shard's limit: the governor's, or before it wrote one the shard's share of the plan (as a
 * consumer with no governor yet holds the plan's threads).
 */
export function limitOf(view: ShardView, planCap: number, index: number): number {
  return view.meta?.limit ?? shardCapacity(planCap, index);
}

/**
 * Whether the shard's open slots are all held by live leases: the fleet's own solves, each freed
 * once its answer is ready (or at its end), so a consumer that waits gets one. False while the
 * governor has opened none (paused), and when a refusal's hold-off, not the leases, closes it.
 */
export function fullOfLive(view: ShardView, planCap: number, index: number, now: number): boolean {
  const limit = limitOf(view, planCap, index);
  return limit > 0 && liveSlots(view, now).length >= limit;
}

/**
 * Slots a consumer may take in this shard now: below its limit, and right after a refusal in it
 * that the governor has not yet seen followed by an acceptance, below the slots held then (the
 * fleet-wide refusal signal, per shard: the invocations hold off instead of each being refused
 * in turn before the governor's next tick; it lapses after {@link REFUSAL_HOLD_OFF_MS}).
 */
export function roomInShard(view: ShardView, planCap: number, index: number, now: number): number {
  return Math.max(0, limitInForce(view, planCap, index, now) - liveSlots(view, now).length);
}

/** A shard's limit, and below it the refused count while its refusal hold-off is in force (roomInShard). */
export function limitInForce(view: ShardView, planCap: number, index: number, now: number): number {
  const limit = limitOf(view, planCap, index);
  const { refusedAt, refusedHeld } = view.meta ?? {};
  if (refusedAt !== undefined && refusedHeld !== undefined && now - refusedAt <= REFUSAL_HOLD_OFF_MS)
    return Math.min(limit, refusedHeld);
  return limit;
}

/**
 * The slot indexes a taker chooses among in shard `index`: below the limit in force
 * (`limitInForce`) and below the shard's share of the fleet-wide refusal room (`fleetRoomOf`,
 * spread as `fleetRoomFull` spreads it). The counts alone are read before the take, so two takers
 * that read the shard at once both saw room for one; offered the whole limit, they took two
 * different slots and one was refused (a fleet others left one thread of two: 22–31 refusals in
 * 75 s, `npm start -- --solver-threads 2 --solver-foreign-threads 1`). Offered only the slots in
 * force, they race for the same slot and the conditional take lets one through.
 */
export function slotsInForce(
  view: ShardView,
  lane: { planCap: number; shards: number },
  index: number,
  now: number,
  room: number | undefined,
): number {
  const limit = limitInForce(view, lane.planCap, index, now);
  if (room === undefined) return limit;
  return Math.min(limit, roomShare(room, lane.shards, index));
}

/**
 * The fleet-wide refusal room a consumer honours before it takes a slot: while the thread
 * ledger's newest refusal is in force (`roomLimit`: no acceptance at its count since, within
 * {@link REFUSAL_HOLD_OFF_MS}; halved in a run of refusals), the threads the fleet may hold, else
 * undefined (the shards' limits alone). A shard's own hold-off (`roomInShard`) only holds off its
 * own takers: on a lane of several shards a neighbour's step cost one refusal per shard, and each
 * hold-off lapsed alone and was tested alone; the ledger's one signal, which every consumer reads
 * before a fresh submission anyway (the spend grant), holds the whole fleet off after one.
 */
export function fleetRoomOf(
  reading: Pick<ThreadLedgerReading, 'lastRefusal' | 'lastAcceptance' | 'refusalRun' | 'liftedAt'> | undefined,
  planCap: number,
  now: number,
): number | undefined {
  if (reading === undefined) return undefined;
  const room = roomLimit(reading, planCap, now);
  return room < planCap ? room : undefined;
}

/**
 * Whether the fleet-wide refusal room (`fleetRoomOf`) closes shard `index` of a lane of `shards`
 * to a taker that sees `live` slots held in it: they fill the shard's share of the room, the room
 * spread over the shards as the governor spreads a ceiling (`shardLimits`), so the shards together
 * hold the room and no more. A taker tries every shard from a random one, so a fleet whose shards
 * fill unevenly still reaches the room. (Before, a shard closed once its live slots scaled to the
 * lane, `fleetHeldOf`, reached the room: a 2-shard lane held at most room − 1, and less as its
 * shards filled unevenly, for the whole hold-off after every refusal.)
 */
export function fleetRoomFull(room: number | undefined, live: number, shards: number, index: number): boolean {
  return room !== undefined && live >= roomShare(room, shards, index);
}

/** Shard `index`'s share of a fleet-wide refusal room of `room` threads over `shards` shards. */
function roomShare(room: number, shards: number, index: number): number {
  return splitEvenly(Math.max(0, room), Math.max(1, shards))[index] ?? 0;
}

/**
 * The free slot indexes of a shard below its limit, in random order (consumers that read the same
 * view spread over them instead of racing for the first).
 */
export function freeSlotIndexes(view: ShardView, limit: number, now: number, random: () => number): number[] {
  const taken = new Set(liveSlots(view, now).map((slot) => slot.slot));
  const free: number[] = [];
  for (let i = 0; i < limit; i++) if (!taken.has(i)) free.push(i);
  for (let i = free.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [free[i], free[j]] = [free[j] as number, free[i] as number];
  }
  return free;
}

/** What a consumer needs of the lease store. */
export interface LeaseTaker {
  /** The shard's meta and taken slots (eventually consistent: a conditional take settles races). */
  view(shard: string): Promise<ShardView>;
  /**
   * Take `slot` of `shard` for `taskId` if it is free (never taken, released, or past its
   * `until`). False when another holder has it.
   */
  take(lease: LeaseSlot): Promise<boolean>;
  /** Free a slot this holder took (only if it still holds it). */
  release(lease: Pick<LeaseSlot, 'shard' | 'slot' | 'taskId'>): Promise<void>;
  /** Record an over-cap refusal in a shard, with the slots the refusing consumer saw held. */
  refused(shard: string, at: number, held: number): Promise<void>;
}

/**
 * Take one of the probe's own slots (`PROBE_SLOT_BASE` onwards, `PROBE_SLOTS` of them) in
 * `lease.shard` for `lease`'s task, whatever the shard's limit: the governor's synthetic probe
 * (functions/governor/thread-probe.ts) and a consumer carrying the probe's task
 * (functions/consumer/lease-holding.ts) both. Undefined when every probe slot is held.
 */
export async function takeProbeSlot(
  leases: Pick<LeaseTaker, 'take'>,
  lease: Omit<LeaseSlot, 'slot'>,
): Promise<LeaseSlot | undefined> {
  for (let k = 0; k < PROBE_SLOTS; k++) {
    const slot: LeaseSlot = { ...lease, slot: PROBE_SLOT_BASE + k };
    if (await leases.take(slot)) return slot;
  }
  return undefined;
}

/** What a delivery's lease needs from its consumer (ConsumerDeps.leases). */
export interface LeaseLane {
  leases: LeaseTaker;
  /** The lane's shard keys (`shardKeys`). */
  shards: readonly string[];
  /** Threads the plan leaves the fleet (plan − reserved): a shard's share before the governor set a limit. */
  planCap: number;
  /** How long a lease lasts, ms: the solve's deadline (a crashed holder's slot is free after it). */
  leaseMs: number;
}

/** What the governor needs of the lease store. */
export interface LeaseKeeper {
  /** Every shard of the lane, strongly consistent. */
  views(shards: readonly string[]): Promise<ShardView[]>;
  /** Set a shard's limit (and the lanes' ceilings, clear its refusal hold-off, when asked). */
  setLimit(
    shard: string,
    limit: number,
    options?: { clearRefusal?: boolean; lanes?: { normal: number; high: number } },
  ): Promise<void>;
  /** Clear a shard's refusal hold-off if its refusal is older than `answeredAt` (an acceptance since). */
  clearRefusal(shard: string, answeredAt: number): Promise<void>;
  /** Free a slot (only if it still holds `taskId`). */
  release(lease: Pick<LeaseSlot, 'shard' | 'slot' | 'taskId'>): Promise<void>;
  /**
   * Move a live lease's end to `until` (only if the slot still holds the same lease: its task and
   * its take); false when it does not (freed, or taken again after it ended).
   */
  renew(lease: Pick<LeaseSlot, 'shard' | 'slot' | 'taskId' | 'takenAt'>, until: number): Promise<boolean>;
}

/**
 * A consumer records its acceptance with the fleet's held threads as its own shard shows them,
 * scaled to the lane's shards (fleetHeldOf): on a lane of several shards that count falls short of
 * the leases by up to a shard's worth, so an estimate the fleet filled looked unfilled and a big
 * plan climbed back from a neighbour's departure a few threads a tick. The governor counts every
 * live lease: an acceptance since its last read, with no refusal after it, was made while the
 * fleet held at least those leases but the accepted one.
 */
export function filledAcceptance(
  reading: Pick<ThreadLedgerReading, 'lastAcceptance' | 'lastRefusal'>,
  held: number,
  fresh: boolean,
): Pick<ThreadLedgerReading, 'lastAcceptance'> | Record<string, never> {
  const acceptance = reading.lastAcceptance;
  if (!fresh || acceptance === undefined) return {};
  if (reading.lastRefusal !== undefined && reading.lastRefusal.at >= acceptance.at) return {};
  return { lastAcceptance: { at: acceptance.at, held: Math.max(acceptance.held, held - 1) } };
}
