/**
 * The actuator in AWS: each lane's event source mapping (`ScalingConfig.MaximumConcurrency`
 * 2–1000 as the ceiling, `Enabled` to pause), and the consumer's reserved concurrency kept at
 * least the sum of the mappings' maxima (a reservation below that throttles, and throttled
 * messages can reach the DLQ unprocessed).
 *
 * Lambda's control plane allows ~15 requests/s per account, so calls happen only on a change:
 * the actuator remembers the mappings it read or set, and a tick that changes nothing calls
 * nothing. The reservation is read afresh before every change, because an operator may have
 * lowered it by hand since (a remembered figure would then hide a throttling reservation).
 * Raising: reservation first, then the mappings; lowering: mappings first, then the reservation,
 * so the sum never exceeds the reservation.
 * Accounts that cannot reserve (the unreserved floor of 100 would be breached) fall back to the
 * mappings alone and say so once.
 */
import {
  GetEventSourceMappingCommand,
  GetFunctionConcurrencyCommand,
  PutFunctionConcurrencyCommand,
  UpdateEventSourceMappingCommand,
  type LambdaClient,
} from '@aws-sdk/client-lambda';
import { MAPPING_MAX_CONCURRENCY, MAPPING_MIN_CONCURRENCY } from '../core/settings.js';
import type { Decision, Lane } from '../core/governor/types.js';
import type { LaneSetting } from '../core/governor/signals.js';
import type { LaneActuator } from '../core/governor/ports.js';
import { describeError } from './solver-context.js';

export interface LambdaActuatorOptions {
  lambda: LambdaClient;
  mappingIds: { normal: string; high?: string | undefined };
  /** The consumer; without it the reservation is left alone. */
  consumerFunctionName?: string | undefined;
  /** Told once when the account cannot reserve concurrency. */
  warn?: (message: string, details?: Record<string, unknown>) => void;
  /**
   * What the changes and errors call the lanes and the function (the overflow lane's actuator
   * says "overflow ceiling 2 → 4", "the overflow consumer's reserved concurrency").
   * @default the lane's name, and "consumer"
   */
  label?: string;
}

/** The overflow lane's actuator: the overflow consumer's mappings, and that function's reservation. */
export interface OverflowActuatorOptions {
  lambda: LambdaClient;
  /** OVERFLOW_MAPPING_ID. */
  mappingId: string;
  /** OVERFLOW_HIGH_MAPPING_ID: the overflow function's mapping on the high queue, when the stack has one. */
  highMappingId?: string | undefined;
  /** OVERFLOW_FUNCTION_NAME; without it the reservation is left alone. */
  functionName?: string | undefined;
  warn?: (message: string, details?: Record<string, unknown>) => void;
}

/** A mapping or reservation call failed. */
export class ActuatorError extends Error {
  override readonly name = 'ActuatorError';
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
  }
}

/**
 * A failed call in a few words: the error's name and message (Lambda's: never the key), with the
 * fix for the one an operator meets after a redeploy or a typo (a mapping or function not there).
 */
function causeOf(error: unknown): string {
  const hint =
    (error as { name?: string }).name === 'ResourceNotFoundException'
      ? ' (check EVENT_SOURCE_MAPPING_IDS and CONSUMER_FUNCTION_NAME against the governor function’s environment)'
      : '';
  return `${describeError(error)}${hint}`;
}

/** Does this error say the account's unreserved concurrency floor forbids the reservation? */
export function isUnreservedFloorError(error: unknown): boolean {
  const e = error as { name?: string; message?: string };
  return e?.name === 'InvalidParameterValueException' && /unreserved/i.test(e.message ?? '');
}

const clampCeiling = (n: number) => Math.max(MAPPING_MIN_CONCURRENCY, Math.min(MAPPING_MAX_CONCURRENCY, Math.round(n)));

/** Build the Lambda actuator. */
export function createLambdaActuator(
  options: LambdaActuatorOptions,
): LaneActuator & { readonly reservationSupported: boolean } {
  const lanes: Lane[] = options.mappingIds.high ? ['normal', 'high'] : ['normal'];
  // With a label and two lanes, both are named: "overflow high ceiling 2 → 4".
  const laneName = (lane: Lane) =>
    options.label ? (lanes.length > 1 ? `${options.label} ${lane}` : options.label) : lane;
  const functionName = options.label ? `${options.label} consumer` : 'consumer';
  const reservationName = options.label ? `${options.label} reserved concurrency` : 'reserved concurrency';
  const known = new Map<Lane, LaneSetting>();
  let reserved: number | null | undefined; // undefined: not read yet; null: none set
  let appliedSum: number | undefined; // the mappings' sum the last apply left
  let reservationSupported = options.consumerFunctionName !== undefined;
  let warned = false;

  const readMapping = async (lane: Lane): Promise<LaneSetting> => {
    const uuid = options.mappingIds[lane] as string;
    const out = await options.lambda.send(new GetEventSourceMappingCommand({ UUID: uuid })).catch((error: unknown) => {
      throw new ActuatorError(
        `could not read the ${laneName(lane)} lane's event source mapping ${uuid}: ${causeOf(error)}`,
        { cause: error },
      );
    });
    const state = out.State ?? 'Enabled';
    const previous = known.get(lane);
    // Transitional states: Enabling counts as on, Disabling as off; Updating keeps what we knew.
    const enabled =
      state === 'Enabled' || state === 'Enabling'
        ? true
        : state === 'Disabled' || state === 'Disabling'
          ? false
          : (previous?.enabled ?? true);
    const setting = { ceiling: out.ScalingConfig?.MaximumConcurrency ?? MAPPING_MAX_CONCURRENCY, enabled };
    known.set(lane, setting);
    return setting;
  };

  /** The reservation as it stands now (read every time: it may have been changed by hand). */
  const readReservation = async (): Promise<number | null> => {
    const name = options.consumerFunctionName as string;
    const out = await options.lambda
      .send(new GetFunctionConcurrencyCommand({ FunctionName: name }))
      .catch((error: unknown) => {
        throw new ActuatorError(
          `could not read the ${functionName}'s (${name}) reserved concurrency: ${causeOf(error)}`,
          {
            cause: error,
          },
        );
      });
    reserved = out.ReservedConcurrentExecutions ?? null;
    return reserved;
  };

  const setReservation = async (wanted: number, changes: string[]) => {
    try {
      await options.lambda.send(
        new PutFunctionConcurrencyCommand({
          FunctionName: options.consumerFunctionName as string,
          ReservedConcurrentExecutions: wanted,
        }),
      );
      changes.push(`${reservationName} ${reserved ?? 'none'} → ${wanted}`);
      reserved = wanted;
    } catch (error) {
      if (!isUnreservedFloorError(error))
        throw new ActuatorError(
          `could not set the ${functionName}'s reserved concurrency to ${wanted}: ${causeOf(error)}`,
          {
            cause: error,
          },
        );
      reservationSupported = false;
      if (!warned) {
        warned = true;
        options.warn?.(
          `This account cannot reserve concurrency for the ${functionName} (unreserved floor); the mappings alone cap it from now on.`,
          {
            wanted,
            error: (error as Error).message,
          },
        );
      }
    }
  };

  return {
    get reservationSupported() {
      return reservationSupported;
    },
    async read() {
      const [normal, high] = await Promise.all(lanes.map(readMapping));
      return high ? { normal: normal as LaneSetting, high } : { normal: normal as LaneSetting };
    },
    async apply(decision: Pick<Decision, 'ceilings' | 'enabled'>) {
      const changes: string[] = [];
      for (const lane of lanes) if (!known.has(lane)) await readMapping(lane);
      const wanted = wantedSettings(lanes, decision);
      const wantedReservation = lanes.reduce((total, lane) => total + (wanted.get(lane) as LaneSetting).ceiling, 0);
      const unchanged = (lane: Lane) => {
        const want = wanted.get(lane) as LaneSetting;
        const have = known.get(lane) as LaneSetting;
        return want.ceiling === have.ceiling && want.enabled === have.enabled;
      };
      if (appliedSum === wantedReservation && lanes.every(unchanged)) return { changes };
      const have = reservationSupported ? await readReservation() : undefined;
      if (reservationSupported && (have === null || (have as number) < wantedReservation))
        await setReservation(wantedReservation, changes);
      for (const lane of updateOrder(lanes, wanted, known)) {
        const want = wanted.get(lane) as LaneSetting;
        const have = known.get(lane) as LaneSetting;
        if (want.ceiling === have.ceiling && want.enabled === have.enabled) continue;
        try {
          await options.lambda.send(
            new UpdateEventSourceMappingCommand({
              UUID: options.mappingIds[lane] as string,
              ...(want.ceiling !== have.ceiling ? { ScalingConfig: { MaximumConcurrency: want.ceiling } } : {}),
              ...(want.enabled !== have.enabled ? { Enabled: want.enabled } : {}),
            }),
          );
        } catch (error) {
          // What the mapping holds now is unknown: read it again next time.
          known.delete(lane);
          throw new ActuatorError(
            `could not update the ${laneName(lane)} lane's event source mapping ${options.mappingIds[lane]}: ${causeOf(error)}`,
            {
              cause: error,
            },
          );
        }
        if (want.ceiling !== have.ceiling) changes.push(`${laneName(lane)} ceiling ${have.ceiling} → ${want.ceiling}`);
        if (want.enabled !== have.enabled) changes.push(`${laneName(lane)} ${want.enabled ? 'enabled' : 'disabled'}`);
        known.set(lane, want);
      }
      if (reservationSupported && reserved !== null && reserved !== undefined && reserved > wantedReservation)
        await setReservation(wantedReservation, changes);
      appliedSum = wantedReservation;
      return { changes };
    },
  };
}

/**
 * Each lane's mapping as the decision wants it. Every mapping's maximum counts toward the
 * reservation, enabled or not: a disabled mapping enabled again (by hand) starts at it. While
 * another lane consumes, a disabled lane's mapping waits at the floor: before, it kept its last
 * ceiling and counted it, and a plan of 600 whose high lane took the turn asked for 1 170 (570
 * disabled + 600), which an account of 1 000 refused, and the reservation was given up for good. A
 * pause (no lane consuming) changes only Enabled: the reservation stays for the resume.
 */
function wantedSettings(
  lanes: readonly Lane[],
  decision: Pick<Decision, 'ceilings' | 'enabled'>,
): Map<Lane, LaneSetting> {
  const consuming = lanes.some((lane) => decision.enabled[lane]);
  return new Map(
    lanes.map((lane) => [
      lane,
      {
        ceiling: decision.enabled[lane] || !consuming ? clampCeiling(decision.ceilings[lane]) : MAPPING_MIN_CONCURRENCY,
        enabled: decision.enabled[lane],
      },
    ]),
  );
}

/**
 * The lanes in the order their mappings are updated: those that shrink first, then those that
 * grow, so a turn handed from one lane to the other never has both at their larger maximum at
 * once (above the reservation).
 */
function updateOrder(lanes: readonly Lane[], wanted: Map<Lane, LaneSetting>, known: Map<Lane, LaneSetting>): Lane[] {
  const shrinking = (lane: Lane) => {
    const want = wanted.get(lane) as LaneSetting;
    const have = known.get(lane) as LaneSetting;
    return want.ceiling < have.ceiling || (!want.enabled && have.enabled);
  };
  return [...lanes.filter(shrinking), ...lanes.filter((lane) => !shrinking(lane))];
}

/**
 * The overflow lane's actuator: its mapping on the normal queue is the `normal` lane, its mapping
 * on the high queue (when the stack has one) the `high` lane (MaximumConcurrency and Enabled),
 * and the overflow function's reservation is kept at least their sum, on the same rules and with
 * the same change-only calls as the primary's.
 */
export function createOverflowActuator(
  options: OverflowActuatorOptions,
): LaneActuator & { readonly reservationSupported: boolean } {
  return createLambdaActuator({
    lambda: options.lambda,
    mappingIds: { normal: options.mappingId, ...(options.highMappingId ? { high: options.highMappingId } : {}) },
    consumerFunctionName: options.functionName,
    label: 'overflow',
    ...(options.warn ? { warn: options.warn } : {}),
  });
}
