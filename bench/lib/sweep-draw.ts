/**
 * The drawn `npm start` runs of `npm run bench:sweep`: one seed, one flag set over the axes of the
 * command, so a sweep reaches combinations nobody wrote down. Each axis is drawn on its own (with
 * the share below), within what `start` accepts and the configuration allows: a batch of at most
 * half the threads the fleet may use (the mapping's floor of two invocations), dialects with the
 * protocols they speak, pause levels under the halt level under the starting balance. Left out:
 * `--concurrency` (a fixed ceiling turns the governor off, and with it the pauses the judge's rules
 * rest on: a fixed maximum dead-letters through an outage, as the lab shows), and the flags that
 * change how a run is shown or served rather than what it meets (`--serve`, `--endpoint`,
 * `--max-duration`, `--json`, `--log-level`).
 */
import { dialectsSpeaking, SOLVER_PROTOCOLS } from '../../functions/core/solver-protocol.js';
import { pick, stream } from '../../local/solver-sim/prng.js';

/** One drawn run: its seed and the flags after `captcha-fleet start`. */
export interface DrawnRun {
  seed: number;
  flags: string[];
}

const PLANS = [2, 3, 5, 8, 12, 20, 50] as const;
const BATCHES = [1, 1, 1, 2, 5, 10] as const;

/** The run `seed` of a sweep: its flags, the same for the same seed. */
export function drawStartRun(seed: number): DrawnRun {
  const random = stream(seed, 'sweep');
  const chance = (share: number) => random() < share;
  const int = (low: number, high: number) => low + Math.floor(random() * (high - low + 1));
  const flags: string[] = ['--seed', String(seed), '--tasks', String(pick(random, [60, 80, 120, 200]))];
  flags.push('--malformed', String(int(0, 5)));
  // Parked three times in four: the default design.
  flags.push('--solve-mode', chance(0.75) ? 'park' : 'wait');
  const threads = pick(random, PLANS);
  flags.push('--solver-threads', String(threads));
  // The plan the governor is told: the account's, or (one run in ten) half or twice it.
  const told = chance(0.1) ? Math.max(2, pick(random, [Math.floor(threads / 2), 2 * threads])) : threads;
  if (told !== threads) flags.push('--plan-threads', String(told));
  const reserved = told >= 4 && chance(0.1) ? int(1, Math.floor(told / 2)) : 0;
  if (reserved > 0) flags.push('--reserved-threads', String(reserved));
  const usable = told - reserved;
  flags.push(
    '--batch-size',
    String(
      pick(
        random,
        BATCHES.filter((b) => 2 * b <= usable),
      ),
    ),
  );
  if (chance(0.25)) flags.push('--solver-foreign-threads', String(int(1, threads)));
  if (chance(0.2)) {
    const balance = round(0.1 + random() * 0.3);
    const pause = round(0.03 + random() * 0.07);
    flags.push('--solver-balance', String(balance), '--solver-price', String(pick(random, [0.001, 0.003, 0.005])));
    flags.push('--halt-balance', String(Math.max(pause, round(balance / 2))), '--pause-balance', String(pause));
  }
  if (chance(0.4)) flags.push('--solver-error-rate', String(pick(random, [0.02, 0.05, 0.1, 0.2])));
  if (chance(0.15)) flags.push('--solver-unsolvable-rate', String(pick(random, [0, 0.05, 0.2])));
  // An account error: the tasks stay queued, the fleet paused.
  if (chance(0.03)) flags.push('--solver-bad-key');
  if (chance(0.4)) flags.push('--solver-latency-ms', String(pick(random, [200, 1000, 2000, 3000])));
  if (chance(0.3))
    for (let n = int(1, 3); n > 0; n--) flags.push('--solver-outage', `${int(3, 40)}:${pick(random, [2, 5, 10, 20])}`);
  if (chance(0.5)) {
    flags.push('--solver-protocol', 'create-task');
    flags.push('--solver-dialect', pick(random, dialectsSpeaking('create-task')));
  } else if (chance(0.3)) flags.push('--solver-dialect', pick(random, dialectsSpeaking('res-php')));
  if (chance(0.35)) flags.push('--crash-rate', String(pick(random, [0.05, 0.1, 0.2])));
  if (chance(0.6)) flags.push('--faults', `random:${int(1, 9999)}@${pick(random, [30, 60, 90])}`);
  if (chance(0.2)) flags.push('--visibility-timeout', String(pick(random, [6, 30])));
  if (chance(0.4)) flags.push('--rate', String(pick(random, [2, 5, 20])));
  if (chance(0.15)) {
    flags.push('--overflow-sim');
    if (chance(0.3)) flags.push('--overflow-outage', `${int(3, 40)}:${pick(random, [5, 20])}`);
    if (chance(0.3)) {
      const protocol = pick(random, SOLVER_PROTOCOLS);
      flags.push('--overflow-protocol', protocol, '--overflow-dialect', pick(random, dialectsSpeaking(protocol)));
    }
  }
  if (chance(0.15)) flags.push('--high-share', String(pick(random, [0, 0.5, 1])));
  if (chance(0.1)) flags.push('--tick-ms', String(pick(random, [500, 3000])));
  return { seed, flags };
}

function round(usd: number): number {
  return Math.round(usd * 100) / 100;
}
