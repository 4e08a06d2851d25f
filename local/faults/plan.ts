/**
 * Fault plans for the fault proxy (local/faults/proxy.ts): windows of time in which requests to
 * DynamoDB or SQS are throttled, answered 5xx, reset, answered slowly, or committed with their
 * answer lost. A plan is written out (`--faults dynamodb:throttle:0.6@20+40,…`) or drawn from a
 * seed (`--faults random`), so runs with other seeds meet other mixes, and any run can be
 * repeated from its seed.
 */
import { pick, type Random, stream } from '../solver-sim/prng.js';

export const FAULT_SERVICES = ['dynamodb', 'sqs'] as const;
export type FaultService = (typeof FAULT_SERVICES)[number];

/**
 * - `throttle`: a share of requests answered with the service's throttling error (400);
 * - `unavailable`: a share (1 by default: a window of outage) answered HTTP 500 or 503;
 * - `reset`: a share of connections reset before the request reaches the service;
 * - `slow`: a share of answers held back (the request done, its answer late);
 * - `lost_commit`: a share of writes (and receives) done by the service, their answer lost to a reset.
 */
export const FAULT_KINDS = ['throttle', 'unavailable', 'reset', 'slow', 'lost_commit'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** One window of one fault on one service. */
export interface FaultWindow {
  service: FaultService;
  kind: FaultKind;
  /** From the proxy's arming, ms. */
  startMs: number;
  durationMs: number;
  /** Share of the service's requests (writes and receives for `lost_commit`) hit, 0–1. */
  rate: number;
  /** `slow`: how long an answer is held, ms (drawn per request between the two). */
  delayMs?: readonly [number, number];
  /** `unavailable`: the status answered. @default 503 */
  status?: 500 | 503;
  /** Only requests of these operations (`UpdateItem`, `SendMessage`, …). @default all */
  operations?: readonly string[];
  /** Only requests whose body contains this text (a test aims at one write). @default all */
  bodyIncludes?: string;
  /** Hurt at most this many requests. @default no limit */
  count?: number;
}

export interface FaultPlan {
  windows: FaultWindow[];
  /** The seed the plan was drawn from, when drawn. */
  seed?: number;
}

/** What a drawn mix may contain, and over how long. */
export interface FaultMixOptions {
  /** Windows fall within this span from the arming, ms. */
  horizonMs: number;
  /** Fault kinds to draw from. @default all */
  kinds?: readonly FaultKind[];
  services?: readonly FaultService[];
  /** Windows to draw. @default 3–5 */
  windows?: number;
}

/** The ranges the issue's measurements span. */
const RANGES: Record<FaultKind, { durationS: [number, number]; rate: [number, number] }> = {
  throttle: { durationS: [10, 60], rate: [0.1, 0.9] },
  unavailable: { durationS: [10, 120], rate: [1, 1] },
  reset: { durationS: [10, 60], rate: [0.1, 0.4] },
  slow: { durationS: [10, 60], rate: [0.2, 0.8] },
  lost_commit: { durationS: [10, 60], rate: [0.1, 0.6] },
};

const between = (random: Random, [low, high]: readonly [number, number]) => low + random() * (high - low);

/**
 * A mix drawn from `seed`: every kind in `kinds` at least once (when there is room), on random
 * services and times, none of them mostly hidden under an outage on its own service.
 */
export function drawFaultMix(seed: number, options: FaultMixOptions): FaultPlan {
  const random = stream(seed, 'fault-mix');
  const kinds = options.kinds ?? FAULT_KINDS;
  const services = options.services ?? FAULT_SERVICES;
  const count = options.windows ?? 3 + Math.floor(random() * 3);
  const windows: FaultWindow[] = [];
  // Each kind once before any repeats, in a drawn order.
  const order = [...kinds];
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j] as FaultKind, order[i] as FaultKind];
  }
  for (let n = 0; n < count; n++) {
    const kind = order[n] ?? pick(random, kinds);
    const range = RANGES[kind];
    const durationMs = Math.round(between(random, range.durationS) * 1000);
    const startMs = Math.round(random() * Math.max(0, options.horizonMs - durationMs));
    const window: FaultWindow = {
      service: pick(random, services),
      kind,
      startMs,
      durationMs,
      rate: Math.round(between(random, range.rate) * 100) / 100,
    };
    if (kind === 'slow') {
      const high = Math.round(between(random, [800, 4_000]));
      window.delayMs = [Math.round(high / 4), high];
    }
    if (kind === 'unavailable') window.status = random() < 0.5 ? 500 : 503;
    windows.push(window);
  }
  return { windows: unmask(windows, services).sort((a, b) => a.startMs - b.startMs), seed };
}

/** A window of outage (5xx at rate 1) on `service`. */
const isOutageOn = (window: FaultWindow, service: FaultService) =>
  window.kind === 'unavailable' && window.rate >= 1 && window.service === service;

/** How much of `window` an outage on `service` covers, ms. */
function coveredByOutage(window: FaultWindow, service: FaultService, windows: readonly FaultWindow[]): number {
  let covered = 0;
  for (const outage of windows) {
    if (outage === window || !isOutageOn(outage, service)) continue;
    const from = Math.max(outage.startMs, window.startMs);
    const to = Math.min(outage.startMs + outage.durationMs, window.startMs + window.durationMs);
    covered = Math.max(covered, to - from);
  }
  return covered;
}

/**
 * A window mostly under an outage on its own service is mostly hidden by it (a request the outage
 * answers never meets the other fault), so a mix drawn to hold every class would hold some in name
 * only: one such window moves to a service where no outage hides it, or else starts when the
 * outage ends. Decided after the draw, so a mix that had no hidden window is the same as before.
 */
function unmask(windows: FaultWindow[], services: readonly FaultService[]): FaultWindow[] {
  const hidden = (window: FaultWindow, service: FaultService) =>
    coveredByOutage(window, service, windows) * 2 > window.durationMs;
  for (const window of windows) {
    if (window.kind === 'unavailable' || !hidden(window, window.service)) continue;
    const elsewhere = services.find((service) => service !== window.service && !hidden(window, service));
    if (elsewhere !== undefined) {
      window.service = elsewhere;
      continue;
    }
    // Outages in time order, so a window pushed past one is then checked against the next.
    const outages = windows.filter((o) => isOutageOn(o, window.service)).sort((a, b) => a.startMs - b.startMs);
    for (const outage of outages)
      if (window.startMs < outage.startMs + outage.durationMs && outage.startMs < window.startMs + window.durationMs)
        window.startMs = outage.startMs + outage.durationMs;
  }
  return windows;
}

/** Thrown for a fault spec that does not parse; names the expected form. */
export class FaultSpecError extends Error {
  override readonly name = 'FaultSpecError';
}

/**
 * Parse `SERVICE:KIND[:RATE]@START+DURATION` (seconds), comma-separated, e.g.
 * `dynamodb:unavailable@30+60,sqs:throttle:0.5@10+40,dynamodb:slow:0.5@0+30`.
 */
export function parseFaultSpec(spec: string): FaultPlan {
  const windows = spec
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '')
    .map(parseWindow);
  if (windows.length === 0) throw new FaultSpecError('no fault window given');
  return { windows };
}

const WINDOW = /^(dynamodb|sqs):([a-z_]+)(?::(\d*\.?\d+))?@(\d+(?:\.\d+)?)\+(\d+(?:\.\d+)?)$/;

function parseWindow(text: string): FaultWindow {
  const match = WINDOW.exec(text);
  const kind = match?.[2] as FaultKind | undefined;
  if (!match || kind === undefined || !(FAULT_KINDS as readonly string[]).includes(kind))
    throw new FaultSpecError(
      `"${text}" is not SERVICE:KIND[:RATE]@START+DURATION (SERVICE ${FAULT_SERVICES.join('|')}, KIND ${FAULT_KINDS.join('|')}, seconds; e.g. dynamodb:throttle:0.5@20+40)`,
    );
  const rate = match[3] === undefined ? (kind === 'unavailable' ? 1 : 0.5) : Number(match[3]);
  if (!(rate > 0 && rate <= 1)) throw new FaultSpecError(`"${text}": the rate must be within (0, 1]`);
  return {
    service: match[1] as FaultService,
    kind,
    startMs: Number(match[4]) * 1000,
    durationMs: Number(match[5]) * 1000,
    rate,
    ...(kind === 'slow' ? { delayMs: [500, 2_000] as const } : {}),
  };
}

/** A plan in the spec's words, for a summary line. */
export function describeFaultPlan(plan: FaultPlan): string {
  return plan.windows
    .map(
      (w) =>
        `${w.service}:${w.kind}${w.kind === 'unavailable' ? `(${w.status ?? 503})` : ''}:${w.rate}@${Math.round(w.startMs / 1000)}+${Math.round(w.durationMs / 1000)}`,
    )
    .join(',');
}

/** When the last window ends, ms from the arming. */
export function faultPlanEndMs(plan: FaultPlan): number {
  return Math.max(0, ...plan.windows.map((w) => w.startMs + w.durationMs));
}
