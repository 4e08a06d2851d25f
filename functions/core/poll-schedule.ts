/**
 * When to ask res.php for an answer: the protocol's fixed schedule and an adaptive one that
 * learns each method's solve times. Pure: no clock and no I/O; every time is passed in, as ms
 * after the solver accepted the task.
 *
 * Why it matters: a thread of the solver plan is paid from acceptance until the answer is read.
 * An answer that is ready but waits for the next poll holds that thread for nothing. With the
 * protocol's 15 s / 5 s schedule and reCAPTCHA-like solve times (log-normal, median 20 s), an
 * answer waits about 2.7 s on average, some 11 % of the thread-time paid; for 4 s images a third
 * (docs/solver-client.md has the measurements). Polling where the answers actually arrive gives
 * most of that capacity back for a bounded number of extra result requests.
 */
import { DEFAULT_POLL, METHOD_KIND, type MethodKind, type SolverMethod } from './solver-protocol.js';

/** First request and interval after it, ms, by method kind (the protocol's are DEFAULT_POLL). */
export type PollDefaults = Partial<Record<MethodKind, { firstPollMs: number; intervalMs: number }>>;

/**
 * What the client saw of one completed solve. The true moment the answer became ready lies in
 * the bracket (`lastNotReadyMs`, `answeredMs`]: after the last request that was told
 * CAPCHA_NOT_READY was sent, and before the answering request's response arrived.
 */
export interface SolveObservation {
  /** ms after acceptance at which the last CAPCHA_NOT_READY request was sent; absent when the first poll answered. */
  lastNotReadyMs?: number;
  /** ms after acceptance at which the answer was read. */
  answeredMs: number;
  /** res.php get requests this solve made. */
  resultRequests: number;
}

/** The poll times of one solve, fixed when the solve starts so later observations do not move it. */
export interface PollPlan {
  readonly method: SolverMethod;
  /** `protocol-default` until a method has enough history (or always, for the fixed schedule). */
  readonly source: 'protocol-default' | 'adaptive';
  /** ms after acceptance of the first result request. */
  readonly firstPollMs: number;
  /** The shortest gap between two planned requests of one task (a late request keeps at least half of it). */
  readonly minIntervalMs: number;
  /** Planned request times, ms after acceptance, ascending; the tail follows the last one. */
  readonly offsetsMs: readonly number[];
  /** First gap after the last planned offset; gaps double from there… */
  readonly tailStartMs: number;
  /** …up to this gap, kept until the deadline. */
  readonly tailMaxMs: number;
  /** The first planned request time at or after `notBeforeMs` (ms after acceptance). */
  nextPollAt(notBeforeMs: number): number;
}

/** Counters a benchmark reads: what polling cost and what it is estimated to have wasted. */
export interface PollStats {
  /** Completed solves observed. */
  tasks: number;
  /** Their res.php get requests. */
  resultRequests: number;
  /** Sum of the estimated time answers waited for the request that read them, ms. */
  estimatedWaitMs: number;
  /** Sum of accept → answer read, ms. */
  answeredMs: number;
  meanResultRequests: number;
  meanEstimatedWaitMs: number;
  /** Estimated wait as a share of the thread-time paid (accept → answer read). */
  waitShare: number;
}

/** A poll schedule: plans solves and learns (or just counts) from their observations. */
export interface PollSchedule {
  readonly kind: 'fixed' | 'adaptive';
  /** The plan for a solve of `method` starting now. */
  plan(method: SolverMethod): PollPlan;
  /** Report a completed solve (not a resumed one: its acceptance time is unknown). */
  observe(method: SolverMethod, observation: SolveObservation): void;
  /**
   * Estimated time the answer of `observation` waited, ms: the mean distance from the answer
   * to the recent ready-time estimates inside its bracket, or half the bracket if none fall in it.
   */
  estimateWaitMs(method: SolverMethod, observation: SolveObservation): number;
  /** Counters per method and in total. */
  stats(): { total: PollStats; byMethod: Partial<Record<SolverMethod, PollStats>> };
}

/** Tuning of the adaptive schedule; every field has a default. */
export interface AdaptiveScheduleOptions {
  /**
   * Plan used before a method has history, and the tail's longest gap. A simulator answering
   * in milliseconds wants ms-scale defaults here.
   * @default DEFAULT_POLL (image: 5 s then 5 s; token: 15 s then 5 s)
   */
  pollDefaults?: PollDefaults;
  /**
   * Result requests per task the schedule may spend, in expectation over recent solves.
   * @default 20
   */
  requestBudget?: number;
  /** Observations kept per method (most recent). @default 64 */
  windowSize?: number;
  /** Observations needed before a method leaves the protocol default. @default 8 */
  minSamples?: number;
  /** Quantile of the brackets' lower bounds where the first poll goes. @default 0.05 */
  firstPollQuantile?: number;
  /** The minimum interval is this fraction of the median solve time… @default 0.05 */
  minIntervalFraction?: number;
  /** …but not under this, ms (simulated solves take tens of ms)… @default 10 */
  minIntervalFloorMs?: number;
  /** …nor over this, ms. @default 1000 */
  minIntervalCeilingMs?: number;
}

const ADAPTIVE_DEFAULTS: Required<AdaptiveScheduleOptions> = {
  pollDefaults: {},
  requestBudget: 20,
  windowSize: 64,
  minSamples: 8,
  firstPollQuantile: 0.05,
  minIntervalFraction: 0.05,
  minIntervalFloorMs: 10,
  minIntervalCeilingMs: 1000,
};

/**
 * The protocol's own schedule: first poll after 5 s (images) or 15 s (tokens), then every 5 s.
 * It learns nothing but counts like the adaptive one, so a benchmark can compare the two.
 */
export function createFixedPollSchedule(options: { pollDefaults?: PollDefaults } = {}): PollSchedule {
  const history = new History(ADAPTIVE_DEFAULTS.windowSize);
  return {
    kind: 'fixed',
    plan: (method) => defaultPlan(method, options.pollDefaults),
    observe: (method, observation) => history.add(method, observation),
    estimateWaitMs: (method, observation) => history.estimateWaitMs(method, observation),
    stats: () => history.stats(),
  };
}

/**
 * A schedule whose solves are never asked for before `earliestMs` after acceptance. The overflow
 * consumer runs on one: its budget assumes a slot starts at most one solve per `minSolveSeconds`,
 * and a slot starts its next solve only once it has read the answer of the last one, so no answer
 * read before that time keeps the assumption true whatever the provider's speed. Observations and
 * counters are the inner schedule's.
 */
export function withEarliestPoll(inner: PollSchedule, earliestMs: number): PollSchedule {
  if (!(earliestMs > 0)) return inner;
  return {
    kind: inner.kind,
    plan(method) {
      const plan = inner.plan(method);
      return {
        method: plan.method,
        source: plan.source,
        firstPollMs: Math.max(plan.firstPollMs, earliestMs),
        minIntervalMs: plan.minIntervalMs,
        offsetsMs: plan.offsetsMs.map((offset) => Math.max(offset, earliestMs)),
        tailStartMs: plan.tailStartMs,
        tailMaxMs: plan.tailMaxMs,
        nextPollAt: (notBeforeMs) => plan.nextPollAt(Math.max(notBeforeMs, earliestMs)),
      };
    },
    observe: (method, observation) => inner.observe(method, observation),
    estimateWaitMs: (method, observation) => inner.estimateWaitMs(method, observation),
    stats: () => inner.stats(),
  };
}

/**
 * A schedule that learns, per method, when answers become ready and polls there.
 *
 * Method, for each method separately:
 * 1. Keep the last `windowSize` completed solves as brackets (lo, hi] around their ready time
 *    (lo: the last not-ready request, 0 when the first poll answered; hi: the answer read).
 *    Until `minSamples` exist, use the protocol default.
 * 2. Estimate each ready time by its bracket's midpoint. Brackets are as wide as the gaps that
 *    produced them, so estimates sharpen as the schedule does: the fit feeds itself.
 * 3. Minimum interval: `minIntervalFraction` of the median estimate, clamped to
 *    [`minIntervalFloorMs`, `minIntervalCeilingMs`] (250 ms–1 s for real 5–20 s solves, a few
 *    ms for a simulator's 50 ms ones). No two planned requests of a task are closer than this.
 * 4. First poll: the `firstPollQuantile` quantile of the lower bounds, the fast end of recent
 *    solves (lower bounds, because an answer can only be read after it is ready).
 * 5. Body: the later requests are placed at recent estimates, choosing the set that minimises
 *    the window's total wait plus λ per request (a request at t is made only by solves not
 *    answered before t), by dynamic programming; λ is bisected so the mean requests per task
 *    over the window stay within `requestBudget`. Requests end up dense where answers arrive
 *    and sparse where few do; the last one sits at the slowest recent estimate. (Spacing at
 *    even quantiles was tried first: with a long tail it spends its last request at the slowest
 *    solve and leaves a wide gap before it.)
 * 6. Tail, for a solve slower than any recent one: gaps start at twice the minimum interval and
 *    double up to the default interval (the protocol's 5 s), so a stalled solve costs a logarithmic number of
 *    extra requests, never a storm.
 *
 * Deterministic: the same observations give the same plans.
 */
export function createAdaptivePollSchedule(options: AdaptiveScheduleOptions = {}): PollSchedule {
  const settings = { ...ADAPTIVE_DEFAULTS, ...options };
  if (!(settings.requestBudget >= 1)) throw new RangeError('requestBudget must be at least 1');
  if (!(settings.windowSize >= settings.minSamples && settings.minSamples >= 1))
    throw new RangeError('need windowSize ≥ minSamples ≥ 1');
  const history = new History(settings.windowSize);
  const cache = new Map<SolverMethod, PollPlan>();
  return {
    kind: 'adaptive',
    plan(method) {
      let plan = cache.get(method);
      if (plan === undefined) {
        plan = adaptivePlan(method, history.brackets(method), settings);
        cache.set(method, plan);
      }
      return plan;
    },
    observe(method, observation) {
      history.add(method, observation);
      cache.delete(method);
    },
    estimateWaitMs: (method, observation) => history.estimateWaitMs(method, observation),
    stats: () => history.stats(),
  };
}

/** The default plan for a method (first poll, then a constant interval). */
export function defaultPlan(method: SolverMethod, pollDefaults: PollDefaults = {}): PollPlan {
  const { firstPollMs, intervalMs } = pollDefaultsFor(method, pollDefaults);
  return makePlan(method, 'protocol-default', [firstPollMs], intervalMs, intervalMs, intervalMs);
}

/**
 * Replay a plan against a known ready time (a simulation or a benchmark): which requests it
 * makes, assuming instant responses.
 */
export function replayPlan(
  plan: PollPlan,
  readyMs: number,
): { resultRequests: number; answeredMs: number; lastNotReadyMs: number | undefined; waitMs: number } {
  let requests = 1;
  let at = plan.nextPollAt(0);
  let lastNotReadyMs: number | undefined;
  while (at < readyMs) {
    lastNotReadyMs = at;
    at = plan.nextPollAt(at + plan.minIntervalMs);
    requests += 1;
  }
  return { resultRequests: requests, answeredMs: at, lastNotReadyMs, waitMs: at - readyMs };
}

interface Bracket {
  lo: number;
  hi: number;
}

function adaptivePlan(
  method: SolverMethod,
  brackets: readonly Bracket[],
  settings: Required<AdaptiveScheduleOptions>,
): PollPlan {
  if (brackets.length < settings.minSamples) return defaultPlan(method, settings.pollDefaults);
  const estimates = brackets.map((b) => (b.lo + b.hi) / 2).sort(ascending);
  const lowers = brackets.map((b) => b.lo).sort(ascending);
  const minIntervalMs = clamp(
    quantile(estimates, 0.5) * settings.minIntervalFraction,
    settings.minIntervalFloorMs,
    settings.minIntervalCeilingMs,
  );
  const firstPollMs = Math.max(minIntervalMs, quantile(lowers, settings.firstPollQuantile));
  const tailMaxMs = Math.max(pollDefaultsFor(method, settings.pollDefaults).intervalMs, minIntervalMs);
  const tailStartMs = Math.min(tailMaxMs, 2 * minIntervalMs);
  const body = fitBody(brackets, firstPollMs, minIntervalMs, settings.requestBudget);
  return makePlan(method, 'adaptive', [firstPollMs, ...body], minIntervalMs, tailStartMs, tailMaxMs);
}

/** Cells of the ready-time histogram the body is fitted on; bounds the fit's cost. */
const MAX_CELLS = 120;

/**
 * Poll times after the first. Each recent solve's ready time is spread evenly over its bracket
 * (what the observation actually says) into cells of at most half the minimum interval, from
 * the first poll to the latest bracket end. A dynamic programme over "the previous request was
 * at cell edge i" picks the edges that minimise expected wait + λ · expected requests; λ (the
 * wait one request must save) is bisected so the mean requests per task, first poll included,
 * stay within the budget. The last request sits at the latest bracket end.
 */
function fitBody(brackets: readonly Bracket[], firstPollMs: number, minIntervalMs: number, budget: number): number[] {
  const end = Math.max(...brackets.map((b) => b.hi));
  if (end <= firstPollMs) return [];
  const width = Math.max(1, minIntervalMs / 2, (end - firstPollMs) / MAX_CELLS);
  const cells = Math.ceil((end - firstPollMs) / width);
  const edge = (j: number): number => (j === cells ? end : firstPollMs + j * width);
  const mass = new Array<number>(cells).fill(0);
  const moment = new Array<number>(cells).fill(0);
  for (const { lo, hi } of brackets) {
    if (hi <= firstPollMs) continue;
    if (hi - lo < 1e-9) {
      const j = Math.min(cells - 1, Math.max(0, Math.ceil((hi - firstPollMs) / width) - 1));
      mass[j] = (mass[j] as number) + 1;
      moment[j] = (moment[j] as number) + hi;
      continue;
    }
    const density = 1 / (hi - lo);
    const from = Math.max(lo, firstPollMs);
    for (let j = Math.max(0, Math.floor((from - firstPollMs) / width)); j < cells && edge(j) < hi; j += 1) {
      const a = Math.max(from, edge(j));
      const b = Math.min(hi, edge(j + 1));
      if (b <= a) continue;
      const m = (b - a) * density;
      mass[j] = (mass[j] as number) + m;
      moment[j] = (moment[j] as number) + (m * (a + b)) / 2;
    }
  }
  // prefixMass[j]: mass in the first j cells, i.e. ready by edge j.
  const prefixMass = [0];
  const prefixMoment = [0];
  for (let j = 0; j < cells; j += 1) {
    prefixMass.push((prefixMass[j] as number) + (mass[j] as number));
    prefixMoment.push((prefixMoment[j] as number) + (moment[j] as number));
  }
  const later = prefixMass[cells] as number;
  const samples = brackets.length;

  const solve = (lambda: number): { polls: number[]; meanRequests: number } => {
    const cost = [0];
    const previous = [0];
    for (let j = 1; j <= cells; j += 1) {
      let best = Number.POSITIVE_INFINITY;
      let bestFrom = 0;
      for (let i = 0; i < j; i += 1) {
        if (edge(j) - edge(i) < minIntervalMs) break;
        const caught = (prefixMass[j] as number) - (prefixMass[i] as number);
        const wait = edge(j) * caught - ((prefixMoment[j] as number) - (prefixMoment[i] as number));
        const total = (cost[i] as number) + wait + lambda * (later - (prefixMass[i] as number));
        if (total < best) {
          best = total;
          bestFrom = i;
        }
      }
      cost.push(best);
      previous.push(bestFrom);
    }
    const polls: number[] = [];
    let requests = samples;
    for (let j = cells; j > 0; j = previous[j] as number) {
      polls.push(edge(j));
      requests += later - (prefixMass[previous[j] as number] as number);
    }
    return { polls: polls.reverse(), meanRequests: requests / samples };
  };

  // A request must save at least a microsecond of wait, so ties go to fewer requests.
  let low = 1e-3;
  let best = solve(low);
  if (best.meanRequests <= budget) return best.polls;
  let high = 1e12;
  best = solve(high);
  if (best.meanRequests > budget) return best.polls;
  // Bisect λ on a log scale; stop once the spend is within 2 % under the budget.
  for (let step = 0; step < 60 && high / low > 1.01; step += 1) {
    const mid = Math.sqrt(low * high);
    const fit = solve(mid);
    if (fit.meanRequests <= budget) {
      high = mid;
      best = fit;
      if (fit.meanRequests >= 0.98 * budget) break;
    } else {
      low = mid;
    }
  }
  return best.polls;
}

function makePlan(
  method: SolverMethod,
  source: PollPlan['source'],
  offsetsMs: number[],
  minIntervalMs: number,
  tailStartWanted: number,
  tailMaxWanted: number,
): PollPlan {
  const offsets = Object.freeze(offsetsMs.map((t) => Math.round(t)));
  // A zero gap would never advance the tail.
  const tailStartMs = Math.max(1, tailStartWanted);
  const tailMaxMs = Math.max(tailStartMs, tailMaxWanted);
  const last = offsets[offsets.length - 1] as number;
  return {
    method,
    source,
    firstPollMs: offsets[0] as number,
    minIntervalMs,
    offsetsMs: offsets,
    tailStartMs,
    tailMaxMs,
    nextPollAt(notBeforeMs) {
      const index = lowerBound(offsets, notBeforeMs);
      if (index < offsets.length) return offsets[index] as number;
      // Tail: gaps double from tailStartMs to tailMaxMs, then stay.
      let at = last;
      let gap = tailStartMs;
      while (gap < tailMaxMs) {
        at += gap;
        if (at >= notBeforeMs) return Math.round(at);
        gap = Math.min(tailMaxMs, gap * 2);
      }
      return Math.round(at + Math.max(1, Math.ceil((notBeforeMs - at) / tailMaxMs)) * tailMaxMs);
    },
  };
}

/** Recent brackets and the counters, per method. */
class History {
  private readonly windows = new Map<SolverMethod, Bracket[]>();
  private readonly counters = new Map<
    SolverMethod,
    { tasks: number; resultRequests: number; estimatedWaitMs: number; answeredMs: number }
  >();

  constructor(private readonly windowSize: number) {}

  add(method: SolverMethod, observation: SolveObservation): void {
    const hi = Math.max(0, observation.answeredMs);
    const lo = Math.min(hi, Math.max(0, observation.lastNotReadyMs ?? 0));
    // Count first, so the estimate uses the solves seen before this one.
    const wait = this.estimateWaitMs(method, { ...observation, lastNotReadyMs: lo, answeredMs: hi });
    const counter = this.counters.get(method) ?? { tasks: 0, resultRequests: 0, estimatedWaitMs: 0, answeredMs: 0 };
    counter.tasks += 1;
    counter.resultRequests += observation.resultRequests;
    counter.estimatedWaitMs += wait;
    counter.answeredMs += hi;
    this.counters.set(method, counter);
    const window = this.windows.get(method) ?? [];
    window.push({ lo, hi });
    if (window.length > this.windowSize) window.splice(0, window.length - this.windowSize);
    this.windows.set(method, window);
  }

  brackets(method: SolverMethod): readonly Bracket[] {
    return this.windows.get(method) ?? [];
  }

  estimateWaitMs(method: SolverMethod, observation: SolveObservation): number {
    const hi = observation.answeredMs;
    const lo = Math.min(hi, observation.lastNotReadyMs ?? 0);
    let sum = 0;
    let count = 0;
    for (const b of this.brackets(method)) {
      const estimate = (b.lo + b.hi) / 2;
      if (estimate > lo && estimate <= hi) {
        sum += hi - estimate;
        count += 1;
      }
    }
    return count > 0 ? sum / count : (hi - lo) / 2;
  }

  stats(): { total: PollStats; byMethod: Partial<Record<SolverMethod, PollStats>> } {
    const byMethod: Partial<Record<SolverMethod, PollStats>> = {};
    const total = { tasks: 0, resultRequests: 0, estimatedWaitMs: 0, answeredMs: 0 };
    for (const [method, c] of this.counters) {
      byMethod[method] = withMeans(c);
      total.tasks += c.tasks;
      total.resultRequests += c.resultRequests;
      total.estimatedWaitMs += c.estimatedWaitMs;
      total.answeredMs += c.answeredMs;
    }
    return { total: withMeans(total), byMethod };
  }
}

function withMeans(c: {
  tasks: number;
  resultRequests: number;
  estimatedWaitMs: number;
  answeredMs: number;
}): PollStats {
  return {
    ...c,
    meanResultRequests: c.tasks === 0 ? 0 : c.resultRequests / c.tasks,
    meanEstimatedWaitMs: c.tasks === 0 ? 0 : c.estimatedWaitMs / c.tasks,
    waitShare: c.answeredMs === 0 ? 0 : c.estimatedWaitMs / c.answeredMs,
  };
}

function pollDefaultsFor(
  method: SolverMethod,
  pollDefaults: PollDefaults,
): { firstPollMs: number; intervalMs: number } {
  const kind = METHOD_KIND[method];
  return pollDefaults[kind] ?? DEFAULT_POLL[kind];
}

/** Linear-interpolation quantile of an ascending array (type 7, as in R and NumPy). */
export function quantile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) throw new RangeError('quantile of an empty sample');
  const position = clamp(p, 0, 1) * (sorted.length - 1);
  const below = Math.floor(position);
  const above = Math.min(sorted.length - 1, below + 1);
  const a = sorted[below] as number;
  const b = sorted[above] as number;
  return a + (b - a) * (position - below);
}

/** Index of the first element ≥ value. */
function lowerBound(sorted: readonly number[], value: number): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if ((sorted[mid] as number) < value) low = mid + 1;
    else high = mid;
  }
  return low;
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}

function ascending(a: number, b: number): number {
  return a - b;
}
