/**
 * The watch relay: the governor's watch over parked tasks passes from one invocation to the next
 * without a gap. The schedule starts an invocation every minute; before, each ended two seconds
 * before the next began (a reserved concurrency of one allowed no overlap), so for about three
 * seconds of every minute no watch ran: a parked solve that ended then held its lease, a paid
 * thread nobody used, until the next invocation's first round (on a plan kept full of short
 * solves, about 1 % of its threads). Now an invocation's watch runs past its ticks until the next
 * invocation's watch takes over, and the two never run at once.
 *
 * One item, the baton, names the invocation whose watch runs (`owner`) and how long it may run at
 * the latest (`until`: its invocation's timeout, past which it cannot run). A new invocation takes
 * the baton when nobody holds it or its holder's `until` has passed (a holder that died holds it
 * no longer than that); otherwise it writes itself as `next` and reads the baton every `pollMs`.
 * The holder, once its ticks are over, asks the baton before each round whether a `next` waits;
 * when one does it ends its round, hands the baton over (owner = next) and stops. So a newcomer's
 * watch starts only once the holder's has stopped or can no longer run, whatever fails: a holder
 * that cannot read the baton keeps watching (nobody takes over before it hands over or its time
 * is up), a newcomer that cannot read or write it waits and tries again, and a hand-over that
 * fails is tried again until it holds or the holder's time is up. Every write is conditional on
 * the version its writer read, so two writers never both win.
 */
import { sleep as wait } from './helpers/time.js';
import type { Clock } from './ports.js';

/** The relay's item: whose watch runs, until when at the latest, and who waits to take over. */
export interface WatchBaton {
  /** The invocation whose watch runs (its Lambda request id). */
  owner: string;
  /** The latest its watch runs, epoch ms: past it, anyone may take the baton. */
  until: number;
  /** An invocation waiting to take over, and its own `until`. */
  next?: { owner: string; until: number };
  /** Bumped by every write; each write is conditional on the version its writer read. */
  version: number;
}

/** Where the baton is kept (functions/adapters/watch-baton.ts: an item of the leases table). */
export interface WatchBatonStore {
  /** The baton, strongly consistent; undefined when no watch ever held it. */
  read(): Promise<WatchBaton | undefined>;
  /**
   * Write `baton` (its version the expected one's plus one, or 1) only if the stored baton is still
   * `expected` (the same version, or none when `expected` is undefined); false when it is not.
   */
  write(baton: Omit<WatchBaton, 'version'>, expected: WatchBaton | undefined): Promise<boolean>;
}

/** A newcomer's move on the baton it read: it holds it already, writes one of these, or waits. */
export type RelayMove =
  | { kind: 'holds' }
  | { kind: 'take'; write: Omit<WatchBaton, 'version'> }
  | { kind: 'ask'; write: Omit<WatchBaton, 'version'> }
  | { kind: 'wait' };

/**
 * What `me` (whose watch may run until `until`) does with the baton it read at `now`: hold it
 * (handed over, or its own), take it (none, or its holder's time is up), ask to be next, or wait
 * (already next). Pure.
 */
export function relayMove(baton: WatchBaton | undefined, me: string, until: number, now: number): RelayMove {
  if (baton?.owner === me) return { kind: 'holds' };
  if (baton === undefined || baton.until <= now) return { kind: 'take', write: { owner: me, until } };
  if (baton.next?.owner === me) return { kind: 'wait' };
  return { kind: 'ask', write: { owner: baton.owner, until: baton.until, next: { owner: me, until } } };
}

/**
 * How long a baton handed over is the newcomer's before it confirms it, ms: the newcomer reads the
 * baton every poll (100 ms) and confirms at once (its own `until`). A newcomer that died after it
 * asked never confirms: the holder takes the baton back and watches on (before, the baton was the
 * dead newcomer's until its whole timeout, 75 s with no watch, longer than a lease's renewal lead).
 */
export const HAND_OVER_CONFIRM_MS = 3_000;

/**
 * The baton its holder leaves: to the invocation waiting, for `HAND_OVER_CONFIRM_MS` until it
 * confirms, else to nobody (its time ends now). Pure.
 */
export function handedOver(baton: WatchBaton, now: number): Omit<WatchBaton, 'version'> {
  return baton.next
    ? { owner: baton.next.owner, until: Math.min(baton.next.until, now + HAND_OVER_CONFIRM_MS) }
    : { owner: baton.owner, until: now };
}

export interface WatchRelayOptions {
  store: WatchBatonStore;
  /** This invocation (its Lambda request id). */
  me: string;
  /** How often a newcomer reads the baton while it waits, ms. @default 100 (the watch's fastest round) */
  pollMs?: number;
  clock?: Clock;
  sleep?: (ms: number) => Promise<void>;
}

export interface WatchRelay {
  /**
   * Wait until this invocation holds the baton: its watch may then run until `until` (the
   * invocation's end, past which it cannot run); false when less than `marginMs` would be left
   * first (the store unreadable all along, or a holder that keeps it: this invocation's watch does
   * not run).
   */
  acquire(until: number, remainingMs: () => number, marginMs: number): Promise<boolean>;
  /**
   * Whether the holder's watch stops now: an invocation waits to take over, or the baton is no
   * longer its own. An unreadable baton says no: nobody takes over before this holder hands over
   * or its time is up.
   */
  shouldYield(): Promise<boolean>;
  /**
   * Hand the baton to the invocation waiting, or end this one's hold; tried again every `pollMs`
   * while it fails and the hold's `until` has not come. A newcomer that does not confirm the baton
   * within `HAND_OVER_CONFIRM_MS` (it died after it asked) gives it back: `retaken`, this
   * invocation's watch runs on. Never throws.
   */
  handOver(): Promise<'handed' | 'retaken'>;
}

/** The relay of one invocation. */
export function createWatchRelay(options: WatchRelayOptions): WatchRelay {
  const { store, me } = options;
  const clock = options.clock ?? Date.now;
  const sleep = options.sleep ?? wait;
  const pollMs = options.pollMs ?? 100;
  const readOrFail = async (): Promise<{ baton: WatchBaton | undefined } | undefined> => {
    try {
      return { baton: await store.read() };
    } catch {
      return undefined;
    }
  };
  const writeOrFail = async (baton: Omit<WatchBaton, 'version'>, expected: WatchBaton | undefined) => {
    try {
      return await store.write(baton, expected);
    } catch {
      return false;
    }
  };
  /** Until when this invocation holds the baton (set once it does). */
  let heldUntil = Number.NEGATIVE_INFINITY;
  return {
    async acquire(until, remainingMs, marginMs) {
      for (;;) {
        const read = await readOrFail();
        if (read !== undefined) {
          const move = relayMove(read.baton, me, until, clock());
          if (move.kind === 'holds') {
            const held = read.baton as WatchBaton;
            // Handed over for the confirmation's moments: confirmed (its own `until`) before the
            // watch runs; a confirmation the store refused is tried again after the poll.
            if (held.until >= until || (await writeOrFail({ owner: me, until }, held))) {
              heldUntil = Math.max(held.until, until);
              return true;
            }
          } else if (move.kind !== 'wait') {
            const written = await writeOrFail(move.write, read.baton);
            if (written && move.kind === 'take') {
              heldUntil = until;
              return true;
            }
          }
        }
        if (remainingMs() - pollMs < marginMs) return false;
        await sleep(pollMs);
      }
    },
    async shouldYield() {
      const read = await readOrFail();
      if (read === undefined) return false;
      return read.baton === undefined || read.baton.owner !== me || read.baton.next !== undefined;
    },
    async handOver() {
      // A newcomer may ask between the read and the write (the write fails: read again), or the
      // store may fail: tried again while this invocation's hold lasts.
      let given: Omit<WatchBaton, 'version'> | undefined;
      let confirms = false;
      while (given === undefined && clock() < heldUntil) {
        const read = await readOrFail();
        if (read !== undefined) {
          if (read.baton === undefined || read.baton.owner !== me) return 'handed';
          const baton = handedOver(read.baton, clock());
          if (await writeOrFail(baton, read.baton)) {
            given = baton;
            // Handed its whole hold (less than the confirmation's moments left): nothing to confirm.
            confirms = read.baton.next !== undefined && baton.until < read.baton.next.until;
          }
        }
        if (given === undefined) await sleep(pollMs);
      }
      if (given === undefined || !confirms) return 'handed';
      // Until the newcomer confirms: a baton still the newcomer's short hold once it has passed is
      // taken back (conditional on it: a newcomer confirming meanwhile wins); never past this
      // invocation's own hold.
      for (;;) {
        if (clock() >= heldUntil) return 'handed';
        await sleep(pollMs);
        const read = await readOrFail();
        if (read === undefined) continue;
        const baton = read.baton;
        if (baton === undefined || baton.owner !== given.owner || baton.until !== given.until) return 'handed';
        if (clock() < baton.until) continue;
        if (await writeOrFail({ owner: me, until: heldUntil }, baton)) return 'retaken';
      }
    },
  };
}
