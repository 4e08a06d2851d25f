/**
 * The simulator's knobs: one zod schema, defaults in one place, every problem listed at once.
 */
import { z } from 'zod';
import { DIALECTS, METHODS, SOLVER_KEY_LENGTH, type SolverMethod } from '../../functions/core/solver-protocol.js';
import type { Clock } from '../../functions/core/ports.js';

/** Ways a transient failure shows itself to a client. */
export const TRANSIENT_KINDS = [
  /** HTTP 200 with ERROR_SERVER_ERROR in the requested format. */
  'error_code',
  /** HTTP 500 with a plain-text body. */
  'http_500',
  /** HTTP 200 with an HTML page (a proxy's error page): the body is no protocol answer. */
  'html',
] as const;
export type TransientKind = (typeof TRANSIENT_KINDS)[number];

/** Log-normal solve time: half the answers come faster than the median. */
export interface SolveTimeSpec {
  /** Median solve time, ms. */
  medianMs: number;
  /** σ of the underlying normal: 0 = always the median, 0.5 = a wide tail. */
  spread: number;
}

/**
 * Default solve times: images in a few seconds, token types in 15–25 s (reCAPTCHA-like), as
 * the services publish them; the spread gives the long tail workers see in practice.
 */
export const DEFAULT_SOLVE_TIMES: Readonly<Record<SolverMethod, SolveTimeSpec>> = {
  base64: { medianMs: 4_000, spread: 0.35 },
  textcaptcha: { medianMs: 5_000, spread: 0.35 },
  userrecaptcha: { medianMs: 20_000, spread: 0.35 },
  hcaptcha: { medianMs: 22_000, spread: 0.35 },
  funcaptcha: { medianMs: 25_000, spread: 0.35 },
  geetest: { medianMs: 15_000, spread: 0.35 },
  geetest_v4: { medianMs: 15_000, spread: 0.35 },
  turnstile: { medianMs: 15_000, spread: 0.35 },
  amazon_waf: { medianMs: 20_000, spread: 0.35 },
  datadome: { medianMs: 25_000, spread: 0.35 },
};

const usd = z.number().finite().min(0);

/** A time the service is down: ms from the simulator's start, by its clock. */
export const OutageWindowSchema = z.object({
  /** When the outage begins, ms after the simulator was created. */
  startMs: z.number().finite().min(0),
  /** How long it lasts, ms. */
  durationMs: z.number().finite().min(0),
});
export type OutageWindow = z.infer<typeof OutageWindowSchema>;
const solveTime = z.object({ medianMs: z.number().finite().min(0), spread: z.number().finite().min(0).max(3) });

/** What a simulator can be told, at construction or later through `update`. */
export const SolverSimOptionsSchema = z.object({
  /** Seed of every random draw (latency, unsolvable, transient errors, ids, answers). */
  seed: z.number().int().default(1),
  /** Which service's meaning of the codes to speak (see `overCapCode`). */
  dialect: z.enum(DIALECTS).default('captchaai'),
  /** Concurrent threads of the plan; a submission beyond them gets the over-cap code. */
  planThreads: z.number().int().min(0).max(1_000_000).default(50),
  /** Threads other users of the same key hold; they count against the plan. */
  foreignThreads: z.number().int().min(0).max(1_000_000).default(0),
  /** Account balance, USD. */
  balance: usd.default(10),
  /** Price of one solved task, USD (unsolvable tasks are not charged). */
  pricePerSolve: usd.default(0.001),
  /** Per-method prices, USD, overriding `pricePerSolve`. */
  prices: z.partialRecord(z.enum(METHODS), usd).optional(),
  /** Multiplies every solve time (0.01 turns 20 s into 200 ms). */
  latencyScale: z.number().finite().min(0).default(1),
  /** One median for every method, ms, before `latencyScale` (0 = answers are ready at once). */
  medianMs: z.number().finite().min(0).optional(),
  /** Per-method solve times overriding the defaults. */
  solveTimes: z.partialRecord(z.enum(METHODS), solveTime).optional(),
  /** Share of accepted tasks that end ERROR_CAPTCHA_UNSOLVABLE. */
  unsolvableRate: z.number().min(0).max(1).default(0),
  /** Share of in.php / res.php requests answered with a transient failure. */
  transientErrorRate: z.number().min(0).max(1).default(0),
  /** The failures to mix (chosen uniformly per failed request). */
  transientKinds: z
    .array(z.enum(TRANSIENT_KINDS))
    .min(1)
    .default([...TRANSIENT_KINDS]),
  /** Every request answers ERROR_KEY_DOES_NOT_EXIST (a revoked key). */
  badKey: z.boolean().default(false),
  /** Keys accepted (all share one account); unset = any well-formed (32-character) key. */
  validKeys: z.array(z.string().length(SOLVER_KEY_LENGTH)).optional(),
  /** Ban a client IP (IP_BANNED) after this many requests with a rejected key; unset = never. */
  banAfterBadKeyRequests: z.number().int().min(1).optional(),
  /** How long an IP ban lasts, ms. */
  ipBanMs: z.number().int().min(0).default(300_000),
  /** JSON type of captcha ids in `json=1` answers: the services have sent both. */
  jsonIdType: z.enum(['number', 'string']).default('number'),
  /**
   * How long a finished task's answer stays readable, ms; after that its id is unknown
   * (ERROR_WRONG_CAPTCHA_ID), as results expire on the real services. Also bounds memory.
   */
  forgetAfterMs: z.number().int().min(0).default(3_600_000),
  /**
   * How long after a task is finished a report on it is taken, ms; later reports are refused
   * with the dialect's unknown-id code. @default 60 000 for Anti-Captcha (its documented
   * window), 900 000 for 2captcha ("solved over 15 minutes ago", its client's error text), else
   * as long as the task is remembered (`forgetAfterMs`)
   */
  reportWindowMs: z.number().int().min(0).optional(),
  /**
   * How long after its acceptance a JSON API task's result can be asked for, ms; later its id is
   * unknown. @default 300 000 for Anti-Captcha and CapMonster Cloud ("a status update only within
   * 5 minutes of uploading", both providers' own clients), else as long as the task is remembered
   */
  resultWindowMs: z.number().int().min(0).optional(),
  /** Credit a solve's price back when it is reported bad (the refund providers give on review). */
  refundBadReports: z.boolean().default(true),
  /** Most ids one `action=get&ids=` request may ask for. */
  maxIdsPerRequest: z.number().int().min(1).default(100),
  /**
   * Times the service is down. Inside a window every in.php and res.php request (getbalance
   * included) answers HTTP 503 with a short plain-text body, and accepted tasks make no progress:
   * their solve time resumes when the window ends. Windows may overlap.
   */
  outages: z.array(OutageWindowSchema).default([]),
});

/** Options as given (every field optional), plus an optional clock for tests. */
export type SolverSimOptions = z.input<typeof SolverSimOptionsSchema> & {
  /** Epoch-ms clock; defaults to `Date.now`. Tests may pass their own to step time by hand. */
  clock?: Clock;
};
export type ResolvedSolverSimOptions = z.output<typeof SolverSimOptionsSchema>;
/** What `update` accepts: any option but the clock. */
export type SolverSimUpdate = Partial<z.input<typeof SolverSimOptionsSchema>>;

/** The options could not be used; `problems` lists each one. */
export class SolverSimConfigError extends Error {
  override readonly name = 'SolverSimConfigError';
  constructor(
    readonly problems: string[],
    options?: { cause?: unknown },
  ) {
    super(`Invalid solver simulator options:\n${problems.map((p) => `  - ${p}`).join('\n')}`, options);
  }
}

/** Parse options, listing every problem at once. */
export function parseSimOptions(input: z.input<typeof SolverSimOptionsSchema>): ResolvedSolverSimOptions {
  const parsed = SolverSimOptionsSchema.safeParse(input);
  if (!parsed.success) {
    throw new SolverSimConfigError(
      parsed.error.issues.map((issue) => `${issue.path.join('.') || '(options)'}: ${issue.message}`),
      { cause: parsed.error },
    );
  }
  return parsed.data;
}

/** Solve time spec of a method after overrides (before `latencyScale`). */
export function solveTimeFor(options: ResolvedSolverSimOptions, method: SolverMethod): SolveTimeSpec {
  const base = options.solveTimes?.[method] ?? DEFAULT_SOLVE_TIMES[method];
  return options.medianMs === undefined ? base : { medianMs: options.medianMs, spread: base.spread };
}

/** Price of one solve of a method, USD. */
export function priceFor(options: ResolvedSolverSimOptions, method: SolverMethod): number {
  return options.prices?.[method] ?? options.pricePerSolve;
}
