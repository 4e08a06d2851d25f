/**
 * One governor invocation's watch under the relay (functions/core/watch-relay.ts): it takes the
 * baton (waiting while the previous invocation's watch still runs), runs its rounds, and once the
 * invocation's ticks are over asks before each round whether the next invocation waits to take
 * over; then it hands the baton on. Without a baton the watch stops when the ticks are over.
 */
import type { Clock } from '../core/ports.js';
import type { WatchRelay } from '../core/watch-relay.js';
import type { GovernorLog } from './loop.js';
import type { ParkedWatch } from './parked-watch.js';

/**
 * The ticks end this long after the invocation starts, ms: before the schedule's next invocation
 * (a minute later) ticks. The parked design's longer timeout (lib/governor.ts) is its watch's,
 * which runs on until the next invocation's takes over.
 */
export const TICK_WINDOW_MS = 58_000;

/** Milliseconds left to tick: the invocation's, never past the tick window from `started`. */
export function tickWindowOf(started: number, remainingMs: () => number, clock: Clock = Date.now): () => number {
  return () => Math.min(remainingMs(), started + TICK_WINDOW_MS - clock());
}

export interface RelayedWatchOptions {
  watch: Pick<ParkedWatch, 'run'>;
  /** This invocation's relay; absent, the watch runs until the ticks are over. */
  relay?: WatchRelay;
  /** Milliseconds the invocation has left (Lambda's context.getRemainingTimeInMillis). */
  remainingMs: () => number;
  /** The watch stops this long before the invocation's timeout, ms. */
  marginMs: number;
  /** Whether the invocation's ticks are over (its tick window has ended). */
  ticksOver: () => boolean;
  clock?: Clock;
  /** Told when this invocation's watch did not run (the baton not taken before its end). */
  log?: Pick<GovernorLog, 'warn'>;
}

/** Run the watch for as long as this invocation holds the baton. */
export async function runRelayedWatch(options: RelayedWatchOptions): Promise<void> {
  const { watch, relay, remainingMs, marginMs, ticksOver } = options;
  if (relay === undefined) return watch.run(remainingMs, marginMs, ticksOver);
  const clock = options.clock ?? Date.now;
  // The hold lasts until the invocation's end: past it this watch cannot run, before it no other starts.
  if (!(await relay.acquire(clock() + remainingMs(), remainingMs, marginMs))) {
    options.log?.warn(
      'parked watch did not run: the relay baton was not handed over before this invocation ended (the store unreadable, or a holder that kept it); parked tasks wait for the next watch or their lease',
    );
    return;
  }
  // Watched again while a newcomer that asked never confirmed the hand-over (it died): the baton came back.
  for (let handed = false; !handed; ) {
    try {
      await watch.run(remainingMs, marginMs, async () => ticksOver() && (await relay.shouldYield()));
    } finally {
      handed = (await relay.handOver()) === 'handed' || remainingMs() <= marginMs;
    }
  }
}
