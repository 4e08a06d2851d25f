/**
 * The governor Lambda's handler (functions/governor/handler.ts) with a failed tick: the invocation
 * fails, but only once its watch has handed over. Lambda freezes an environment as soon as its
 * handler answers: answered at once, the watch stopped mid-round with the relay's baton still its
 * own, and no watch ran until the baton's hold ran out (~25 s of a minute in AWS). The wiring and
 * the relayed watch are stand-ins that record when each ends.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { GovernorStateConflictError } from '../../functions/core/governor/ports.js';

const events: string[] = [];

vi.mock('../../functions/core/environment.js', async (original) => ({
  ...((await original()) as object),
  parseEnvironment: () => ({}),
}));
vi.mock('../../functions/governor/wiring.js', () => ({
  createGovernorFromEnvironment: async () => ({
    settings: { tickMs: 1_000, metricsNamespace: 'HandlerTest' },
    loop: {
      lastDecision: undefined,
      beginInvocation: () => undefined,
      tick: async () => {
        events.push('tick failed');
        throw new GovernorStateConflictError(7);
      },
    },
    watch: { stats: { recorded: 0, failedRounds: 0 }, countSolvedNow: async () => undefined },
    baton: undefined,
  }),
}));
vi.mock('../../functions/governor/relayed-watch.js', async (original) => ({
  ...((await original()) as object),
  runRelayedWatch: async () => {
    await new Promise((resolve) => setTimeout(resolve, 300));
    events.push('watch handed over');
  },
}));

afterEach(() => {
  events.length = 0;
});

describe('the governor handler', () => {
  it('fails an invocation whose tick failed only after its watch has handed over', async () => {
    // Prepare: an invocation with 1.5 s to live (one tick, then the watch runs to its end).
    const { handler } = await import('../../functions/governor/handler.js');
    const endsAt = Date.now() + 1_500;
    const context = { awsRequestId: 'r1', getRemainingTimeInMillis: () => Math.max(0, endsAt - Date.now()) };

    // Act
    const outcome = await handler({}, context).then(
      () => 'answered',
      (error: Error) => error.name,
    );
    events.push(`handler ${outcome}`);

    // Assess: before, the handler answered with the tick's error while the watch still ran.
    expect(outcome).toBe('GovernorTickError');
    expect(events.at(-2)).toBe('watch handed over');
    expect(events.at(-1)).toBe('handler GovernorTickError');
  });
});
