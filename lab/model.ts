import { ACCOUNT_HAND_BACK_BACKOFF, HAND_BACK_BACKOFF, SOLVER_RETRY_DEFAULTS } from '../functions/core/backoff.js';
import { WATCH_CALLS } from '../functions/core/cost/fleet-bill.js';
import { CONSUMER_CPU, FUNCTION_SIZING, lambdaCpuSeconds } from '../functions/core/function-sizing.js';
import { PARKED_SUBMIT_SECONDS } from '../functions/core/governor/submitters.js';
import { OUTAGE_RECHECK_MS } from '../functions/core/governor/config.js';
import { SQS_MAPPING_RAMP } from '../functions/core/mapping-ramp.js';
import { LEASE_WAIT_POLL_MS, WATCH_VIEW_MS } from '../functions/core/thread-leases.js';

/**
 * The lab's model constants: how Lambda, the worker pools and the consumer behave, and what
 * compute costs. One place, so docs/lab.md can cite them and a user can override any of them.
 */

/** Behaviour and prices the simulator assumes; every field can be overridden per run. */
export interface ModelParams {
  /** Lambda's SQS event source mapping starts with this many concurrent invocations (functions/core/mapping-ramp.ts). */
  esmInitialConcurrency: number;
  /** …and adds up to this many per minute while messages wait (AWS: 300). */
  esmScaleUpPerMinute: number;
  /** Granularity of that ramp, seconds. */
  esmStepSeconds: number;
  /** With the queue empty, the pollers shrink to the highest concurrency used within this window, seconds. */
  esmScaleDownSeconds: number;
  /**
   * Time an invocation spends before its submission waiting on I/O: the claim's and the record's
   * round trips, seconds. Its CPU comes on top, at the function's share of a vCPU
   * (`consumerCpuSeconds`).
   */
  invocationOverheadSeconds: number;
  /**
   * Extra time when no warm execution environment is free, not counting the bundle's own CPU
   * (Lambda fetching the code and starting the runtime), seconds; `consumerInitCpuSeconds` comes on top.
   */
  coldStartSeconds: number;
  /**
   * CPU a warm consumer invocation uses, on one vCPU, seconds: in a function of M MB it takes
   * 1 769 ÷ M times as long (functions/core/function-sizing.ts, lambdaCpuSeconds). Counted before
   * the submission (the most it can delay it). Measured: docs/cost.md, "The consumer's memory".
   */
  consumerCpuSeconds: number;
  /**
   * CPU a cold start adds, on one vCPU, seconds: the bundle's import and the first invocation's
   * extra (its clients' first requests); taken at the function's share of a vCPU like the rest
   * (AWS documents no faster CPU while a function initializes).
   */
  consumerInitCpuSeconds: number;
  /**
   * CPU of a waiting invocation's read for room (a round over the lease shards, parked; the thread
   * ledger's item, waiting), on one vCPU, seconds: each read takes it at the function's share, so
   * a freed thread is found that much later and the reads come that much further apart.
   */
  consumerReadCpuSeconds: number;
  /**
   * The consumer's memory, MB; unset: as the stack sizes it for the trace's settings
   * (functions/core/function-sizing.ts, consumerSizing). Its CPU follows it.
   */
  consumerMemoryMb?: number;
  /** Pool workers' retry after an over-cap or transient answer: first wait, doubled per attempt up to the maximum (±50 % jitter), seconds. */
  backoffBaseSeconds: number;
  backoffMaxSeconds: number;
  /** Wait before a pool worker retries a task refused for lack of funds, seconds. */
  accountRetrySeconds: number;
  /**
   * The Lambda consumer's solver client (functions/adapters/solver-client.ts, DEFAULT_RETRY):
   * over-cap and transient answers retried this many times within the invocation…
   */
  consumerMaxOverCapRetries: number;
  consumerMaxTransientRetries: number;
  /** …after min(max, base × 2^attempt) × [0.5, 1) seconds. */
  consumerBackoffBaseSeconds: number;
  consumerBackoffMaxSeconds: number;
  /**
   * Then the invocation hands the task back (ChangeMessageVisibility; one more receive when it
   * returns) for ceil(c/2 + random × c/2) s, c = min(max, base × 2^(receives − 1))
   * (functions/consumer/process-task.ts, resolveTiming / backoffSeconds).
   */
  handBackBaseSeconds: number;
  handBackMaxSeconds: number;
  /** The same for account errors (no money, key refused). */
  accountHandBackBaseSeconds: number;
  accountHandBackMaxSeconds: number;
  /**
   * The consumer keeps the thread of a submission it hands back unanswered (its deadline passed,
   * or an outage outlasted its retries) counted in the thread ledger, as a leftover, until its
   * lease ages out (functions/consumer/thread-tracking.ts). False models the consumer before that
   * (it freed the count at the hand-back while the solver still held the thread).
   */
  consumerKeepsUnansweredLease: boolean;
  /** res.php poll interval while a solve runs, seconds (a poll inside an outage fails). */
  pollIntervalSeconds: number;
  /**
   * With `pollLoss`, the answer is read on this schedule instead of the protocol's (first poll
   * after 5 s images / 15 s tokens, then every 5 s): the first poll and the interval, seconds.
   * @default undefined - the protocol's schedule
   */
  pollSchedule?: { firstSeconds: number; intervalSeconds: number };
  /**
   * The parked design's watch (functions/governor/parked-watch.ts): it runs its rounds this many
   * seconds of every minute, all but the relay's hand-over from one governor invocation's watch to
   * the next's (functions/core/watch-relay.ts, about 0.3 s; before the relay the watch stopped a
   * second before the 58 s timeout and the next invocation began at the minute: 57 s).
   */
  watchSecondsPerMinute: number;
  /**
   * Time between the watch's rounds, each one bulk poll of the solver, seconds; 0 (the default):
   * its `pollMs` as the governor wires it, `watchPollMs` of the requests a round asking about
   * every thread of the plan takes (100 ms at any size: ten bulk requests a second up to 50
   * threads, one per thread per 5 s above: lab/sim/parked.ts `watchRoundSecondsOf`; the watch's
   * real rounds follow the submissions parked, never more than the plan, so the lab's are never
   * faster than the built ones).
   */
  watchRoundSeconds: number;
  /**
   * The watch reads the leases (a Query of every shard) and looks up new leases' records at most
   * this often (its `viewEveryMs`, WATCH_VIEW_MS: 1 s): at the first round this long after the
   * last read; the rounds between poll the leases it last read, seconds.
   */
  watchViewSeconds: number;
  /**
   * A consumer waiting for a slot reads the shards this often, ×0.5–1.5 jitter
   * (ConsumerTiming.leaseWaitPollMs, LEASE_WAIT_POLL_MS: 250 ms), seconds.
   */
  leaseWaitPollSeconds: number;
  /** A lease younger than this is not looked up by the watch yet (its `settleMs`), seconds. */
  watchSettleSeconds: number;
  /**
   * From the watch's round that finds an answer ready to the answer recorded: one result request
   * to the solver (res.php get, ~100 ms), the conditional write of the answered record, the
   * completion event and the DeleteMessage (~15 ms each, one after the other), seconds.
   */
  watchRecordSeconds: number;
  /**
   * From a watch round's start to the slots it frees: its bulk res.php request (one round trip)
   * and the lease's DeleteItem, seconds. A round lasts at least this long: the next one starts
   * when it ends, or at its cadence if that is later (ParkedWatch.run).
   */
  watchPollSeconds: number;
  /**
   * The parked design's probe carries a waiting task (1, the product: functions/governor/probe-carrier.ts):
   * the governor receives the message at the head of the queue and has a consumer invocation
   * submit it as the probe, so an accepted probe's paid solve is that task's; refused, the task
   * is visible again at once (a receive counted; near the DLQ a fresh copy, its count started
   * again). 0 measures the synthetic probe it replaced (a paid solve thrown away when accepted).
   * The waiting design's probe is the synthetic one either way.
   */
  probeWithWaitingTask: number;
  /**
   * A refused probe's carried task is kept for the next probes of the same governor invocation
   * (functions/governor/probe-carrier.ts: the consumer hides it instead of handing it back, and
   * the governor hands it back when the fleet is no longer starved or its invocation ends): this
   * is the invocation's span, seconds (a minute: the schedule's), the kept task carried again with
   * no new receive within it. Near the DLQ the task still goes back as a fresh copy. 0 turns it
   * off (each probe receives the head task anew, as before it was built).
   */
  probeKeepSpanSeconds: number;
  /**
   * From the governor's accepted probe to the tick it wakes (functions/governor/tick-wake.ts): the
   * probe's in.php answer, its acceptance written to the ledger, and that tick's reads, seconds.
   * The woken tick is out of the cadence and makes no probe. 0 turns the wake off (the probe is
   * then read at the next tick, as before it was built).
   */
  probeWakeSeconds: number;
  /**
   * Between ticks, while the governor is paused for the solver's outage, it reads the balance this
   * often (functions/governor/outage-recheck.ts) and the first read that answers wakes a tick
   * (out of the cadence, no probe), seconds. Modelled at the mean: the tick comes half of this
   * after the outage's end, plus `probeWakeSeconds` for the read's answer and that tick's reads.
   * 0 turns it off (the fleet resumes at the next tick of the cadence, as before it was built).
   */
  outageRecheckSeconds: number;
  /** CloudWatch-fed signals (rates, mean and p95 solve time, error counts) cover this window… */
  metricsWindowSeconds: number;
  /** …ending this long ago: the consumer's metrics reach the governor about a minute late. */
  metricsLagSeconds: number;
  /** Start-up delay of a new worker, seconds. */
  threadStartSeconds: number;
  processStartSeconds: number;
  podStartSeconds: number;
  /**
   * Compute price of one worker second, and of a 256 MB Lambda's invocation second ($0.0000166667
   * per GB-s × 0.25; a consumer of other memory in proportion).
   */
  computeUsdPerSecond: number;
  /** Lambda's request charge ($0.20 per million). */
  lambdaUsdPerRequest: number;
}

export const DEFAULT_MODEL: Readonly<ModelParams> = {
  esmInitialConcurrency: SQS_MAPPING_RAMP.initialConcurrency,
  esmScaleUpPerMinute: SQS_MAPPING_RAMP.scaleUpPerMinute,
  esmStepSeconds: SQS_MAPPING_RAMP.stepSeconds,
  esmScaleDownSeconds: SQS_MAPPING_RAMP.scaleDownSeconds,
  invocationOverheadSeconds: 0.05,
  coldStartSeconds: 0.4,
  consumerCpuSeconds: CONSUMER_CPU.warmSeconds,
  consumerInitCpuSeconds: CONSUMER_CPU.initSeconds,
  consumerReadCpuSeconds: CONSUMER_CPU.readSeconds,
  backoffBaseSeconds: 1,
  backoffMaxSeconds: 16,
  accountRetrySeconds: 30,
  // The consumer's and the solver client's own defaults (functions/core/backoff.ts).
  consumerMaxOverCapRetries: SOLVER_RETRY_DEFAULTS.maxOverCapRetries,
  consumerMaxTransientRetries: SOLVER_RETRY_DEFAULTS.maxTransientRetries,
  consumerBackoffBaseSeconds: SOLVER_RETRY_DEFAULTS.baseBackoffMs / 1000,
  consumerBackoffMaxSeconds: SOLVER_RETRY_DEFAULTS.maxBackoffMs / 1000,
  handBackBaseSeconds: HAND_BACK_BACKOFF.baseSeconds,
  handBackMaxSeconds: HAND_BACK_BACKOFF.maxSeconds,
  accountHandBackBaseSeconds: ACCOUNT_HAND_BACK_BACKOFF.baseSeconds,
  accountHandBackMaxSeconds: ACCOUNT_HAND_BACK_BACKOFF.maxSeconds,
  consumerKeepsUnansweredLease: true,
  pollIntervalSeconds: 5,
  watchSecondsPerMinute: WATCH_CALLS.secondsPerMinute,
  watchRoundSeconds: 0,
  watchViewSeconds: WATCH_VIEW_MS / 1000,
  leaseWaitPollSeconds: LEASE_WAIT_POLL_MS / 1000,
  watchSettleSeconds: 0.3,
  watchRecordSeconds: 0.15,
  watchPollSeconds: 0.1,
  probeWithWaitingTask: 1,
  probeKeepSpanSeconds: 60,
  probeWakeSeconds: 1,
  outageRecheckSeconds: OUTAGE_RECHECK_MS / 1000,
  metricsWindowSeconds: 60,
  metricsLagSeconds: 60,
  threadStartSeconds: 0,
  processStartSeconds: 1,
  podStartSeconds: 10,
  computeUsdPerSecond: 0.0000166667 * 0.25,
  lambdaUsdPerRequest: 0.2 / 1_000_000,
};

/** A numeric model constant's range beyond 0 or more: above `above`, at most `max`, whole when `whole`. */
interface ModelLimit {
  above?: number;
  max?: number;
  whole?: boolean;
}

type NumericModelKey = { [K in keyof ModelParams]-?: ModelParams[K] extends number ? K : never }[keyof ModelParams];

/**
 * Ranges beyond "a number of 0 or more", each where a value outside breaks the model: a ramp step
 * of 0 s divides by zero, a pause of 0 s between tries or reads loops without time passing, a watch cannot run more than the minute's 60 s, retries and concurrency
 * are counts, the waiting-task probe is off or on.
 */
const MODEL_LIMITS: Partial<Record<NumericModelKey, ModelLimit>> = {
  esmInitialConcurrency: { whole: true },
  esmStepSeconds: { above: 0 },
  // A pause between tries, polls or reads of 0 s loops without time passing (a pool retrying
  // through an outage hung; a consumer reading for a slot every 0 s billed Infinity).
  backoffBaseSeconds: { above: 0 },
  backoffMaxSeconds: { above: 0 },
  accountRetrySeconds: { above: 0 },
  consumerBackoffBaseSeconds: { above: 0 },
  handBackBaseSeconds: { above: 0 },
  accountHandBackBaseSeconds: { above: 0 },
  pollIntervalSeconds: { above: 0 },
  watchViewSeconds: { above: 0 },
  leaseWaitPollSeconds: { above: 0 },
  metricsWindowSeconds: { above: 0 },
  consumerMaxOverCapRetries: { whole: true },
  consumerMaxTransientRetries: { whole: true },
  watchSecondsPerMinute: { max: 60 },
  probeWithWaitingTask: { max: 1, whole: true },
};

/** The numeric constants `--model` may set. */
export function numericModelKeys(): NumericModelKey[] {
  return (Object.keys(DEFAULT_MODEL) as (keyof ModelParams)[]).filter(
    (key): key is NumericModelKey => typeof DEFAULT_MODEL[key] === 'number',
  );
}

/**
 * `--model`'s value, `name=value,name=value`: each name one of the numeric constants above, each
 * value a number in its range. Throws naming the setting at fault and what it accepts.
 */
export function parseModelSettings(value: string): Partial<ModelParams> {
  const keys = numericModelKeys();
  const model: Partial<Record<NumericModelKey, number>> = {};
  for (const assignment of value.split(',').map((part) => part.trim())) {
    const [name, raw, extra] = assignment.split('=');
    if (name === undefined || !(keys as string[]).includes(name))
      throw new Error(
        `"${assignment}": expected name=number, the name one of lab/model.ts's numeric constants (${keys.join(', ')})`,
      );
    const key = name as NumericModelKey;
    const number = raw === undefined || raw.trim() === '' || extra !== undefined ? Number.NaN : Number(raw);
    const limit = MODEL_LIMITS[key] ?? {};
    const range = [
      limit.above !== undefined ? `above ${limit.above}` : '0 or more',
      limit.max !== undefined ? `at most ${limit.max}` : undefined,
      limit.whole ? 'a whole number' : undefined,
    ]
      .filter((part) => part !== undefined)
      .join(', ');
    const fits =
      Number.isFinite(number) &&
      number >= 0 &&
      (limit.above === undefined || number > limit.above) &&
      (limit.max === undefined || number <= limit.max) &&
      (!limit.whole || Number.isInteger(number));
    if (!fits)
      throw new Error(`${name}=${raw ?? ''}: ${name} takes a number ${range} (its default: ${DEFAULT_MODEL[key]})`);
    model[key] = number;
  }
  return model as Partial<ModelParams>;
}

/**
 * A parked invocation's length, s: `PARKED_SUBMIT_SECONDS` (0.5 s, set while the consumer ran at
 * 256 MB: its I/O and its CPU there), its warm CPU taking longer at less memory (and less at more).
 */
export function parkedInvocationSeconds(
  memoryMb: number,
  cpuSeconds: number = DEFAULT_MODEL.consumerCpuSeconds,
): number {
  const at256 = lambdaCpuSeconds(cpuSeconds, FUNCTION_SIZING.consumer.memoryMb);
  return PARKED_SUBMIT_SECONDS - at256 + lambdaCpuSeconds(cpuSeconds, memoryMb);
}
