/**
 * The `account` stage: the solver account, its key and IP and its money. Account errors (a
 * rejected key, a banned IP) pause; a cooldown later a balance read that works resumes small and
 * doubles (the rate-limit stage). Near the pause level, with the price per solve learned, the
 * money above it is granted to the consumers as a count of solves (the spend grant, written to
 * the thread ledger), and the fleet pauses once it pays for none; without a price, a balance or
 * its projection by the tick after next under the pause level pauses (after spending the rest);
 * the first funded read resumes at once. Pure.
 */
import { grantCount, type SpendGrant, type ThreadLedgerReading } from '../thread-ledger.js';
import { invocations } from './capacity.js';
import type { Funds, TickContext } from './context.js';
import { neverReadBalance, PROJECTION_TICKS } from './context.js';
import { countingPrice, isPrice } from './price.js';
import { type Flow, pause, pct, resumed, run, seconds, type Stage, usd } from './flow.js';

/** Account error codes by the cause an operator fixes; any other account code leaves the key unusable. */
const ACCOUNT_CAUSES: Readonly<Record<string, string>> = {
  ERROR_WRONG_USER_KEY: 'key rejected',
  ERROR_KEY_DOES_NOT_EXIST: 'key rejected',
  IP_BANNED: 'IP banned',
  ERROR_IP_BANNED: 'IP banned',
  ERROR_IP_NOT_ALLOWED: 'IP banned',
};

/**
 * The cause behind the account errors, from the code the consumer's metrics carry or, where
 * they carry none (CloudWatch counts, the local store), the code the balance read was refused with.
 */
export function accountCause(ctx: Pick<TickContext, 'signals'>): string {
  const { accountErrorCode, balanceError } = ctx.signals;
  const code = accountErrorCode ?? (balanceError?.kind === 'account' ? balanceError.code : undefined);
  if (code === undefined) return 'key or IP refused (no error code seen)';
  return `${ACCOUNT_CAUSES[code] ?? 'key unusable'} (${code})`;
}

/** Why the balance read failed, as far as the reader could tell. */
function unreadableCause(ctx: TickContext): string {
  const failed = ctx.signals.balanceError;
  if (failed?.kind === 'unreachable') return `solver unreachable (${failed.code})`;
  if (failed?.kind === 'account' || ctx.signals.accountErrorCode !== undefined) return accountCause(ctx);
  return failed === undefined ? 'no reason given' : `${failed.code}`;
}

/**
 * A grant lapses this many ticks after the tick that wrote it unless a later tick renews it: a
 * governor that stopped ticking leaves the consumers as they were before grants (the solver's own
 * account answers pause them), never held by a stale count.
 */
export const GRANT_LIFETIME_TICKS = 2 * PROJECTION_TICKS;

/**
 * …and never less than this, ms: a tick's `until` counts from its start, and on a loaded machine a
 * tick took 2.3 s to read its signals and came 3.5–4 s after the last, so a fresh fleet's first
 * grant (4 × the local 1 s tick) lapsed before the next was written; invocations that read no
 * grant in force took no reservation and submitted past the count (`npm start` at 60 threads from
 * $0.35, three runs at once: 11 solves accepted beyond the reservations, 4 of 12 runs past the
 * pause level, 3 of them to $0). A dead governor's last grant holds the consumers this long at most.
 */
export const GRANT_MIN_LIFETIME_MS = 20_000;

/** The solves the money above the pause level still pays for, and the grant that lets the consumers start them. */
interface Granted {
  solves: number;
  price: number;
  /** Where the price comes from: learned from the balance, told (configured), or assumed (UNKNOWN_PRICE_USD). */
  priceSource: 'learned' | 'told' | 'assumed';
  held: number;
  grant: SpendGrant;
}

/**
 * The solves that may still start when `room` solves' worth of money is above the pause level
 * after those in flight: the fair floor's rule, one more while the money is at the level or over
 * it. A hair of tolerance: money and prices in cents make the tie (exactly at the level) common.
 */
function solvesFor(room: number): number {
  return room < -1e-9 ? 0 : Math.floor(room + 1e-9) + 1;
}

/**
 * The spend grant, once the money above the pause level pays for fewer solves than the fleet
 * could start before a grant lapses (reachOf) (or while paused for money): a solve may start
 * while the balance, less what the solves in flight (leftovers included) will be charged, is at
 * or above the pause level (the fair floor's own rule: no solve starts once the money above the
 * level is spoken for). The grant is the ledger's acceptance count those solves take it to.
 * Solves are counted at the price learned from the balance, else the one the account was told,
 * else an assumed one above the providers' list prices (countingPrice): a fleet that starts a few
 * solves above its pause level stops there before it has learned what a solve costs, instead of
 * spending a round of its width past it before the second balance read. Undefined while the money
 * is farther, the ledger unknown, or the account not charged per solve (the projection decides).
 */
function grantFor(ctx: TickContext, flow: Flow): Granted | undefined {
  const { funds, config, signals } = ctx;
  const reading = signals.threadLedger;
  const counted = countingPrice(flow.state.spend, config.priceHintUsd);
  const price = counted.usd;
  if (funds === undefined || reading === undefined || !isPrice(price)) return undefined;
  const { solves, grant } = grantOf(ctx, funds.usd, price, reading.held, reading);
  if (solves > 0 && solves >= reachOf(ctx, flow, reading.acceptances) && ctx.state.pause?.reason !== 'balance')
    return undefined;
  return { solves, price, priceSource: counted.source, held: reading.held, grant };
}

/**
 * The solves `usd` pays for above the pause level at `price` once the `inFlight` solves are
 * charged, and the grant that lets them start: counted in the ledger's reservations where it keeps
 * them (each delivery takes one before it submits), else its acceptances.
 */
function grantOf(
  ctx: TickContext,
  usd: number,
  price: number,
  inFlight: number,
  reading: ThreadLedgerReading,
): { solves: number; grant: SpendGrant } {
  const payable = payableSolves(ctx, usd, inFlight);
  const solves = Math.min(solvesFor((usd - ctx.config.pauseBalance) / price - inFlight), payable ?? Infinity);
  return { solves, grant: { limit: grantCount(reading) + solves, until: grantUntil(ctx) } };
}

/**
 * The solves the solver itself would still take from `usd` once the `inFlight` solves are
 * charged: it refuses a task the balance cannot pay (`ERROR_ZERO_BALANCE`, which CaptchaAI also
 * answers for a full plan). Counted at the price the balance showed (the plain ratio, which reads
 * low rather than high) or the one the account was told; undefined without either (an assumed
 * price would pause a fleet its money still pays for). Without it, a balance under one solve's
 * price above a pause level of 0 was granted one more: refused by the solver, read as a broken
 * key (`PAUSE_ACCOUNT`, "no error code seen") or, at CaptchaAI, as others holding the plan.
 */
function payableSolves(ctx: TickContext, usd: number, inFlight: number): number | undefined {
  const learned = ctx.state.spend.learnedPriceUsd;
  const hint = ctx.config.priceHintUsd;
  const price = learned !== undefined && learned > 0 ? learned : hint !== undefined && hint > 0 ? hint : undefined;
  if (price === undefined) return undefined;
  return Math.max(0, Math.floor(usd / price - inFlight + 1e-9));
}

/** The balance read this tick pays the solver for no solve beyond those in flight (payableSolves). */
function brokeAtSolver(ctx: TickContext): boolean {
  const usd = ctx.funds?.usd;
  const held = ctx.signals.threadLedger?.held ?? 0;
  return usd !== undefined && payableSolves(ctx, usd, held) === 0;
}

/**
 * The solves the fleet could start before a grant written now lapses: `GRANT_LIFETIME_TICKS` of
 * the more of its starts since the last read and its whole width restarted every mean solve
 * (a burst from idle). Unbounded while either count is unknown (the grant is then in force).
 */
function reachOf(ctx: TickContext, flow: Flow, acceptances: number): number {
  const { config, signals } = ctx;
  const seen = ctx.state.spend.acceptedSeen;
  const mean = signals.meanSolveMs;
  if (seen === undefined || mean === undefined || !(mean > 0)) return Number.POSITIVE_INFINITY;
  const tickMs = config.tickMs ?? 10_000;
  const width = flow.allowed * config.tasksPerInvocation * Math.max(1, tickMs / mean);
  return GRANT_LIFETIME_TICKS * Math.max(acceptances - seen, width);
}

/** Run at the free threads with the grant, or pause once it pays for no solve. */
function spendGranted(ctx: TickContext, flow: Flow, granted: Granted, resumed: boolean): Flow {
  const { funds, config } = ctx;
  const at = granted.priceSource === 'assumed' ? ' (assumed until the balance shows the price)' : '';
  const money = `balance $${usd(funds?.usd ?? 0, 4)} at $${usd(granted.price, 4)} a solve${at}, ${granted.held} solve(s) in flight`;
  // Paused, the grant stays in force, used up: invocations already running start nothing more.
  if (granted.solves < 1) {
    // A balance at or under the level itself is said so: "the money above it is spoken for" read
    // as if there were some (`--solver-balance 0`).
    const under = (funds?.usd ?? 0) <= config.pauseBalance;
    const why = under
      ? `the balance $${usd(funds?.usd ?? 0, 4)} is at or under the pause level $${usd(config.pauseBalance)}`
      : brokeAtSolver(ctx)
        ? `the balance pays the solver for no more solves (${money}): it refuses what the balance cannot pay`
        : `the money above the pause level $${usd(config.pauseBalance)} is spoken for (${money})`;
    return {
      ...flow,
      grant: granted.grant,
      proposal: pause(
        'balance',
        'PAUSE_LOW_BALANCE',
        `${resumed ? 'Still paused' : 'Paused'}: ${why}; tasks wait in the queue until it is topped up.`,
      ),
    };
  }
  return {
    ...flow,
    grant: granted.grant,
    proposal: run(
      flow.allowed,
      'SPEND_THE_REST',
      `Spending the rest: ${money}; the money above the pause level pays for ${granted.solves} more, granted to the consumers through the thread ledger.`,
    ),
  };
}

/** What the account's trouble was seen as: the consumers' account errors, else the governor's refused reads. */
function troubleSeen(ctx: TickContext): string {
  const errors = ctx.signals.accountErrors ?? 0;
  if (errors > 0 && !ctx.inGrace) return `the solver answered ${errors} account error(s)`;
  return `the solver refused the governor's last ${ctx.base.spend.refusedReads?.count ?? 0} balance reads`;
}

function startPause(ctx: TickContext, flow: Flow): Flow {
  const { funds, config } = ctx;
  // Account errors while the balance read works and pays for no solve are the solver refusing
  // what the money cannot pay (ERROR_ZERO_BALANCE): a money pause, not a broken key.
  if (ctx.accountTrouble && brokeAtSolver(ctx)) {
    const granted = grantFor(ctx, flow);
    if (granted !== undefined) return spendGranted(ctx, flow, granted, false);
    return {
      ...flow,
      proposal: pause(
        'balance',
        'PAUSE_LOW_BALANCE',
        `Paused: the balance $${usd(funds?.usd ?? 0, 4)} pays the solver for no more solves at the price it showed, and the solver refuses what it cannot charge; tasks wait in the queue until it is topped up.`,
      ),
    };
  }
  if (ctx.accountTrouble) {
    const cause = accountCause(ctx);
    return {
      ...flow,
      proposal: {
        ...pause(
          'account',
          'PAUSE_ACCOUNT',
          `Paused: ${troubleSeen(ctx)}: ${cause}; tasks wait in the queue until a balance read shows the key and IP work again.`,
        ),
        cause,
      },
    };
  }
  // A fleet that has never read its balance (a fresh start whose first read failed) has no money
  // it knows of to count: it starts once a read works. Held at its first ceiling instead, a fleet
  // $0.04 above its pause level started 17 solves at $0.004 in the second before its next tick.
  // A solver that does not answer is an outage from this first tick (availability stage).
  if (neverReadBalance(ctx) && ctx.signals.balanceError?.kind !== 'unreachable') {
    const refused = ctx.signals.balanceError?.kind === 'account';
    return {
      ...flow,
      proposal: refused
        ? {
            ...pause(
              'account',
              'PAUSE_ACCOUNT',
              `Paused: the solver refused the first balance read: ${accountCause(ctx)}; tasks wait in the queue until a balance read shows the key and IP work again.`,
            ),
            cause: accountCause(ctx),
          }
        : pause(
            'balance',
            'PAUSE_LOW_BALANCE',
            `Paused: the balance has not been read yet (${unreadableCause(ctx)}); no solve starts before the money is known.`,
          ),
    };
  }
  const granted = grantFor(ctx, flow);
  if (granted !== undefined) {
    // Until the projection nears the pause level the grant rides along unseen; then it is the decision.
    const near = funds !== undefined && funds.projected < config.pauseBalance;
    return granted.solves < 1 || near ? spendGranted(ctx, flow, granted, false) : { ...flow, grant: granted.grant };
  }
  if (funds === undefined || funds.projected >= config.pauseBalance) return flow;
  const budgeted = spendTheRest(ctx, flow);
  if (budgeted !== undefined) return budgeted;
  const why =
    funds.usd < config.pauseBalance
      ? `balance $${usd(funds.usd)} is under the pause level $${usd(config.pauseBalance)}`
      : `balance $${usd(funds.usd)} will be under the pause level $${usd(config.pauseBalance)} by the next tick (spending $${usd(flow.state.spend.perSecond ?? 0, 4)}/s)`;
  return {
    ...flow,
    proposal: pause('balance', 'PAUSE_LOW_BALANCE', `Paused: ${why}; tasks wait in the queue until it is topped up.`),
  };
}

/**
 * The balance is still over the pause level, but the spending of the tick after next would take
 * it under: rather than stop with that money unspent (a whole fleet's two ticks of solves, which
 * the user left above the pause level to be spent), run at the share of today's use the money
 * above the pause level pays for over those ticks (less what the solves in flight will still be
 * charged), while that is at least the minimum. The share
 * falls every tick as the money does, so the fleet spends down to the pause level and pauses
 * with at most the minimum's two ticks of spending left, never under the level by the same
 * projection. Undefined (pause) when the use is unknown or the share is under the minimum.
 */
function spendTheRest(ctx: TickContext, flow: Flow): Flow | undefined {
  const { funds, config, demand, minimum } = ctx;
  if (funds === undefined || funds.usd < config.pauseBalance || demand.inFlight === undefined) return undefined;
  const ahead = funds.usd - funds.projected;
  if (!(ahead > 0)) return undefined;
  // The solves in flight are charged as they finish: about a mean solve of spending at the rate.
  const committed = ((flow.state.spend.perSecond ?? 0) * (ctx.signals.meanSolveMs ?? 0)) / 1000;
  const share = (funds.usd - config.pauseBalance - committed) / ahead;
  const using = invocations(demand.inFlight, config.tasksPerInvocation);
  const total = Math.min(flow.allowed, Math.floor(using * share + 1e-9));
  if (total < minimum) return undefined;
  return {
    ...flow,
    allowed: total,
    proposal: run(
      total,
      'HALT_LOW_BALANCE',
      `Spending the rest: balance $${usd(funds.usd, 4)} would be under the pause level $${usd(config.pauseBalance)} by the next tick at today's use (${using}); the money above it pays for ${total} invocation(s) until then.`,
    ),
  };
}

/** Paused for money: stay, or resume on the first read that shows funds (at the free threads above the halt level). */
function whileBroke(ctx: TickContext, flow: Flow): Flow {
  const { funds, config } = ctx;
  const granted = grantFor(ctx, flow);
  if (granted !== undefined && granted.solves < 1) return spendGranted(ctx, flow, granted, true);
  // Under the grant the money decides by the count it pays for, not by the projection.
  if (funds === undefined || (granted === undefined && funds.projected < config.pauseBalance)) {
    const why =
      funds === undefined
        ? 'the balance cannot be read'
        : `balance $${usd(funds.usd, 4)}, less ${PROJECTION_TICKS} tick(s) of spending at the last rate, is still under the pause level $${usd(config.pauseBalance)}`;
    return { ...flow, proposal: pause('balance', 'PAUSE_LOW_BALANCE', `Still paused (balance): ${why}.`) };
  }
  // A fleet resumed near the pause level resumes under the grant.
  return resumeFunded(ctx, granted === undefined ? flow : { ...flow, grant: granted.grant }, funds);
}

/** Resume from a money pause: at the free threads above the halt level, else (or while erroring) at the minimum. */
function resumeFunded(ctx: TickContext, flow: Flow, funds: Funds): Flow {
  const { config, signals, minimum } = ctx;
  const state = resumed(ctx, flow.state);
  const underHalt = funds.usd < config.haltBalance;
  if (signals.errorRate !== undefined && signals.errorRate > config.errorRateThreshold) {
    const spend = underHalt ? { ...state.spend, haltCeiling: minimum } : state.spend;
    return {
      ...flow,
      state: { ...state, spend, probe: { ...state.probe, recovery: { ceiling: minimum, reason: 'resume' } } },
      proposal: run(
        minimum,
        'PROBE_RESUME',
        `Resumed at the minimum (${minimum}): balance $${usd(funds.usd)} read back, but the error rate ${pct(signals.errorRate)} is over ${pct(config.errorRateThreshold)}.`,
      ),
    };
  }
  if (!underHalt)
    return {
      ...flow,
      state: { ...state, spend: { ...state.spend, haltCeiling: undefined } },
      proposal: run(
        flow.allowed,
        'PROBE_RESUME',
        `Resumed at the free threads (${flow.allowed}): balance $${usd(funds.usd)} read back above the halt level $${usd(config.haltBalance)}.`,
      ),
    };
  return {
    ...flow,
    state: { ...state, spend: { ...state.spend, haltCeiling: minimum } },
    proposal: run(
      minimum,
      'PROBE_RESUME',
      `Resumed at the minimum (${minimum}): balance $${usd(funds.usd)} is over the pause level but under the halt level $${usd(config.haltBalance)}, so scaling stays halted.`,
    ),
  };
}

/** Paused for the key or IP: a cooldown, then a balance read that works resumes small (doubling in rate-limit). */
function whileRefused(ctx: TickContext, flow: Flow): Flow {
  const { funds, config, cooldown } = ctx;
  const waited = ctx.now - (ctx.state.pause?.since ?? ctx.now);
  if (waited < cooldown || funds === undefined || funds.usd < config.pauseBalance) {
    let why: string;
    // The cause that paused it: this tick's signals may carry no code (a read that works, counts only).
    const cause = ctx.state.pause?.cause ?? accountCause(ctx);
    if (waited < cooldown) why = `${cause}; probing again in ${Math.ceil((cooldown - waited) / 1000)} s`;
    else if (funds === undefined) why = `the balance cannot be read: ${unreadableCause(ctx)}`;
    else why = `balance $${usd(funds.usd)} is still under the pause level $${usd(config.pauseBalance)}`;
    return { ...flow, proposal: pause('account', 'PAUSE_ACCOUNT', `Still paused (account): ${why}.`) };
  }
  const total = Math.min(ctx.minimum, flow.allowed);
  return {
    ...flow,
    state: resumed(ctx, flow.state, { ceiling: ctx.minimum, reason: 'resume' }),
    proposal: run(
      total,
      'PROBE_RESUME',
      `Resumed at ${total} after the probe: balance $${usd(funds.usd)} read back above the pause level; doubling every ${seconds(cooldown)} s while healthy.`,
    ),
  };
}

/**
 * When a grant written now lapses: `GRANT_LIFETIME_TICKS` ticks ahead, each the configured tick or
 * the time since the last tick when that was longer (a governor whose ticks run late, a loaded
 * machine's: locally 1 s ticks came 1.5–4.5 s apart, and a grant 4 s long lapsed between two of
 * them while the fleet was paused at the pause level: 138 solves started under no count), and
 * `GRANT_MIN_LIFETIME_MS` at least.
 */
function grantUntil(ctx: TickContext): number {
  const last = ctx.state.lastDecision?.at;
  const tickMs = Math.max(ctx.config.tickMs ?? 10_000, last !== undefined ? ctx.now - last : 0);
  return ctx.now + Math.max(GRANT_LIFETIME_TICKS * tickMs, GRANT_MIN_LIFETIME_MS);
}

/**
 * The grant the last tick decided, carried while this tick cannot count the money against it
 * (the balance or the thread ledger unread): its count as it stands, its `until` renewed (the
 * governor is ticking: the count is still the most the money paid for at the last read). Dropped
 * instead, it let the consumers start solves no count allowed: one balance read lost to a
 * transient error at the pause level (`npm start -- --solver-threads 40 --solver-balance 2
 * --halt-balance 1.5 --pause-balance 1.5 --seed 7`) cleared the grant for a tick, and the fleet
 * ended 78 solves past the level; left to lapse at its own `until`, a read lost a tick before it
 * did the same. A grant that lapsed (a governor that stopped ticking) is not revived.
 *
 * With the ledger read but not the balance, the money as last read is counted too (the tighter of
 * the two is kept): it paid for what its read left above the pause level, less every solve the
 * ledger accepted beyond the ones it had counted solved then (those in flight at the read and
 * those started since are all still to be charged against it). Without it, a fleet whose last
 * read found the money far from the level ran through the level on the ticks whose reads failed
 * (the property in test/unit/governor-spend-grant.test.ts: reads failing at random, ticks late).
 */
function grantWhileUnread(ctx: TickContext, flow: Flow): SpendGrant | undefined {
  const last = ctx.state.spend.grant;
  const carried =
    last === undefined || ctx.now > last.until ? undefined : { limit: last.limit, until: grantUntil(ctx) };
  const reading = ctx.signals.threadLedger;
  if (reading === undefined) return carried;
  if (ctx.funds !== undefined) return undefined;
  const { lastRead, solvedSeen } = ctx.state.spend;
  const price = countingPrice(ctx.state.spend, ctx.config.priceHintUsd).usd;
  if (lastRead === undefined || solvedSeen === undefined || !isPrice(price)) return carried;
  const { solves, grant: counted } = grantOf(ctx, lastRead.usd, price, reading.acceptances - solvedSeen, reading);
  // A count far beyond what the fleet could start before it lapses bounds nothing: none is written.
  if (carried === undefined && solves >= reachOf(ctx, flow, reading.acceptances)) return undefined;
  return carried === undefined || counted.limit < carried.limit ? counted : carried;
}

function accountFlow(ctx: TickContext, flow: Flow): Flow {
  const paused = ctx.state.pause;
  if (paused === undefined || paused.reason === 'threads') return startPause(ctx, flow);
  if (paused.reason === 'balance') return whileBroke(ctx, flow);
  if (paused.reason === 'account') return whileRefused(ctx, flow);
  // Paused for an outage (or a store's): the grant rides along, so the tick that resumes the fleet
  // resumes it under the count. Without it, a fleet $0.04 above its pause level resumed from an
  // outage at its 20 threads with no grant and spent its balance to $0 within the second.
  const granted = grantFor(ctx, flow);
  return granted === undefined ? flow : { ...flow, grant: granted.grant };
}

export const accountStage: Stage = {
  name: 'account',
  apply(ctx, flow) {
    const next = accountFlow(ctx, flow);
    const grant = next.grant ?? grantWhileUnread(ctx, next);
    const { grant: _last, ...spend } = next.state.spend;
    return {
      ...next,
      ...(grant !== undefined ? { grant } : {}),
      state: { ...next.state, spend: grant !== undefined ? { ...spend, grant } : spend },
    };
  },
};
