/**
 * A wake-up for the wait between the governor's ticks. The governor's probe submission (made
 * while others hold all but fewer threads than the mapping's floor: thread-probe.ts), accepted,
 * calls `wake()`, and the loop ticks at once instead of at its next turn, up to a tick later: the
 * threads a neighbour handed back are used from the probe's answer on. That tick is out of the
 * cadence (the next one is where it was) and makes no probe of its own (one a tick, never more).
 */
export interface TickWake {
  /** Cut the current wait short (or the next one, when none is under way). */
  wake(): void;
  /**
   * Wait `ms` with `sleep`, or less when woken meanwhile or before; true when woken (the pending
   * wake is then used up). `sleep` gets a signal that aborts once the wait is over.
   */
  wait(ms: number, sleep: (ms: number, signal?: AbortSignal) => Promise<void>): Promise<boolean>;
}

export function createTickWake(): TickWake {
  let woken = false;
  let interrupt: (() => void) | undefined;
  return {
    wake() {
      woken = true;
      interrupt?.();
    },
    async wait(ms, sleep) {
      if (!woken) {
        const controller = new AbortController();
        const interrupted = new Promise<void>((resolve) => {
          interrupt = resolve;
        });
        // An aborted sleep rejects: that is the wait ending, not a failure.
        await Promise.race([sleep(ms, controller.signal).catch(() => undefined), interrupted]);
        interrupt = undefined;
        controller.abort();
      }
      const was = woken;
      woken = false;
      return was;
    },
  };
}
