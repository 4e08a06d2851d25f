/**
 * The governor's probe with a carrier (the parked design: functions/governor/thread-probe.ts with
 * probe-carrier.ts): the waiting task's submission is the probe; the synthetic task only when the
 * carrier made none. The carrier and the solver are scripted: what the probe does with each of
 * the carrier's answers is what the test is about (the carrier itself runs on the emulators in
 * test/integration/probe-carrier.test.ts).
 */
import { describe, expect, it } from 'vitest';
import type { SolverPort } from '../../functions/core/ports.js';
import type { ThreadLedgerRecorder } from '../../functions/core/thread-ledger.js';
import type { CarriedProbe, ProbeCarrier } from '../../functions/governor/probe-carrier.js';
import { createThreadProbe } from '../../functions/governor/thread-probe.js';

/** A ledger that records what the probe itself writes (a carried probe's answer is the consumer's to write). */
function ledgerLog() {
  const writes: string[] = [];
  const ledger = {
    accepted: async () => {
      writes.push('accepted');
      return { bucket: Number.NaN };
    },
    refused: async () => {
      writes.push('refused');
      return 0;
    },
    released: async () => undefined,
  } as unknown as ThreadLedgerRecorder;
  return { ledger, writes };
}

function run(answer: CarriedProbe) {
  const synthetic: string[] = [];
  const solver: Pick<SolverPort, 'solve'> = {
    async solve(task, options) {
      synthetic.push(task.id);
      options.onSolverAnswer?.({ request: 'submit', outcome: 'over_cap' });
      throw Object.assign(new Error('ERROR_NO_SLOT_AVAILABLE'), { name: 'OverCapError' });
    },
  };
  let carried = 0;
  const carrier: ProbeCarrier = {
    async carry() {
      carried++;
      return answer;
    },
    release: async () => undefined,
  };
  const { ledger, writes } = ledgerLog();
  const warnings: string[] = [];
  let woken = 0;
  const probe = createThreadProbe({
    solver,
    ledger,
    carrier,
    onAccepted: () => woken++,
    warn: (message, fields) => warnings.push(`${message} ${JSON.stringify(fields ?? {})}`),
  });
  return { probe, synthetic, writes, warnings, woken: () => woken, carried: () => carried };
}

async function settled(probe: { inFlight(): number }): Promise<void> {
  for (let i = 0; i < 200 && probe.inFlight() > 0; i++) await new Promise((resolve) => setTimeout(resolve, 5));
  expect(probe.inFlight()).toBe(0);
}

describe('the governor’s probe with a waiting task', () => {
  it('counts an accepted carried probe and wakes the ticks, with no synthetic task and no ledger write of its own', async () => {
    const t = run({ answer: 'accepted' });
    await t.probe.submit(Date.now());
    await settled(t.probe);
    expect(t.carried()).toBe(1);
    expect(t.synthetic).toEqual([]);
    expect(t.writes).toEqual([]);
    expect(t.woken()).toBe(1);
    expect(t.probe.stats()).toEqual({ made: 1, accepted: 1, refused: 0 });
  });

  it('counts a refused carried probe, with no synthetic task and no wake', async () => {
    const t = run({ answer: 'refused' });
    await t.probe.submit(Date.now());
    await settled(t.probe);
    expect(t.synthetic).toEqual([]);
    expect(t.woken()).toBe(0);
    expect(t.probe.stats()).toEqual({ made: 1, accepted: 0, refused: 1 });
  });

  it('makes the synthetic probe when the carrier submitted nothing (no task waiting, a malformed one, no probe slot)', async () => {
    const t = run({ answer: 'none' });
    await t.probe.submit(Date.now());
    await settled(t.probe);
    expect(t.carried()).toBe(1);
    expect(t.synthetic).toHaveLength(1);
    expect(t.writes).toEqual(['refused']);
    expect(t.probe.stats()).toEqual({ made: 1, accepted: 0, refused: 1 });
  });

  it('makes no synthetic probe after a failed invocation (it may have submitted): counted made, warned with the key redacted', async () => {
    const t = run({
      answer: 'failed',
      error: "the consumer's invocation failed: key=0123456789abcdef0123456789abcdef",
    });
    await t.probe.submit(Date.now());
    await settled(t.probe);
    expect(t.synthetic).toEqual([]);
    expect(t.probe.stats()).toEqual({ made: 1, accepted: 0, refused: 0 });
    expect(t.warnings).toHaveLength(1);
    expect(t.warnings[0]).toContain('governor probe with a waiting task failed');
    expect(t.warnings[0]).not.toContain('0123456789abcdef0123456789abcdef');
  });
});
