/**
 * Chaos for the local runtime: invocations that die, as a Lambda timeout, an out-of-memory kill or
 * a runtime crash would. Two models:
 *
 * - at `complete()` (`guardResultsRepository`): a share of the terminal writes kill their
 *   invocation after solving and before recording;
 * - at any moment (`crashAtRandomMoments`): each invocation dies after a time drawn at its start,
 *   a constant hazard per second of invocation time, wherever its code happens to be.
 *
 * Either way the consumer's own code runs unchanged (one code path) and its recovery is what gets
 * tested: the message returns after its visibility timeout, the next delivery takes the claim over
 * and resumes the solver submission whose id the claim recorded. A dead invocation does nothing
 * more: its port calls never settle, its SDK requests (retries included) and its solver requests
 * are never sent.
 */
import { Agent, type Dispatcher } from 'undici';
import type { DeliveredMessage, MessageCopy, ResultsRepository, TaskQueue } from '../functions/core/ports.js';
import { parseRedelivery, REDELIVERY_ATTRIBUTE } from '../functions/core/redelivery.js';
import { currentInvocation, type InvocationHandle } from './poller.js';
import type { Random } from './solver-sim/prng.js';

export interface ChaosOptions {
  /** Share (0-1) of `complete()` calls that kill their invocation instead of writing. */
  crashRate: number;
  /** Seeded so a run can be repeated. */
  random: Random;
  /** Told of each kill (the runtime counts them). */
  onCrash?: (taskId: string) => void;
  /** Follows each paid submission's id to something durable (see `SolverIdWatch`). */
  ids?: SolverIdWatch;
}

/**
 * Which paid submissions' ids a crash lost: those whose invocation died before the id reached
 * anything durable, the results record (a write of it answered) or a fresh copy of the message
 * that carries it. An acceptance that reached an invocation already dead (its request on the wire
 * when it died) is one; so is an id whose write was still in flight, or failing and about to be
 * retried, when its invocation died (a dead invocation's retries are never sent). The one way a
 * crash can still cost a second payment: nobody can resume a submission whose id nobody kept.
 */
export class SolverIdWatch {
  private readonly kept = new Set<string>();
  /** Ids asked to be written, by the invocation that asked (the last one, when several did). */
  private readonly asked = new Map<string, InvocationHandle>();
  /** Every id the consumers learned (a write of it was asked), with its task. */
  private readonly tasks = new Map<string, string>();

  /** `provider:id`, the key of a submission. */
  static key(provider: string, solverId: string): string {
    return `${provider}:${solverId}`;
  }

  /** An invocation asked to write the id of the task's submission (it may be dead already). */
  ask(key: string, invocation: InvocationHandle, taskId: string): void {
    this.tasks.set(key, taskId);
    if (!this.kept.has(key)) this.asked.set(key, invocation);
  }

  /** The task of each id the consumers learned; an accepted submission not here never reached a consumer's code. */
  known(): ReadonlyMap<string, string> {
    return this.tasks;
  }

  /** The id is durable: on the record, or in a copy of the message. */
  keep(key: string): void {
    this.kept.add(key);
    this.asked.delete(key);
  }

  /** The ids whose invocation died before they were kept. */
  lost(): Set<string> {
    return new Set([...this.asked].filter(([, invocation]) => invocation.dead).map(([key]) => key));
  }
}

/**
 * A task queue whose fresh copies that carry a paid submission's id tell the watch the id is kept
 * (the next delivery resumes it from the copy).
 */
export function watchCarries(queue: TaskQueue, ids: SolverIdWatch): TaskQueue {
  return new Proxy(queue, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (property !== 'requeue' || typeof value !== 'function') return value;
      return async (message: DeliveredMessage, copy: MessageCopy) => {
        const result = await (value as TaskQueue['requeue']).call(target, message, copy);
        const carry = parseRedelivery(copy.attributes?.[REDELIVERY_ATTRIBUTE]?.stringValue)?.carry;
        if (carry !== undefined) ids.keep(SolverIdWatch.key(carry.provider, carry.solverId));
        return result;
      };
    },
  });
}

/**
 * Any port of a Lambda's (the task queue, the completion events): calls from an invocation that
 * is already dead (crashed or timed out) never settle, because a dead Lambda environment sends
 * nothing more. Calls made outside a poller's invocation pass through untouched.
 */
export function guardDeadInvocations<T extends object>(port: T): T {
  return new Proxy(port, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      const method = value as (...args: unknown[]) => unknown;
      return (...args: unknown[]) => (currentInvocation()?.dead ? never() : method.apply(target, args));
    },
  });
}

/**
 * An undici agent for the local solver clients that sends nothing for a dead invocation: Lambda
 * restarts the runtime after a timeout or a crash, so a solve cut off there never goes on to
 * submit (and pay) behind the next delivery's back. A request from a dead invocation is never
 * sent and never answered (its own timeout may still end it).
 */
export class InvocationBoundAgent extends Agent {
  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    if (currentInvocation()?.dead) return true;
    return super.dispatch(options, handler);
  }
}

/** The solver id a repository call writes (recordSolverId, or park with its submission), keyed as SolverIdWatch keys it. */
function solverIdKeyOf(property: string | symbol, args: unknown[]): string | undefined {
  if (property === 'recordSolverId') return SolverIdWatch.key(String(args[3] ?? 'primary'), String(args[2]));
  if (property === 'park') {
    const submission = args[2] as { solverId?: unknown; provider?: unknown } | undefined;
    return SolverIdWatch.key(String(submission?.provider ?? 'primary'), String(submission?.solverId));
  }
  return undefined;
}

/**
 * Wrap a results repository for the local runtime:
 * - with probability `crashRate`, `complete()` kills the invocation it runs in;
 * - any call from an invocation that is already dead (crashed or timed out) never settles,
 *   because a dead Lambda environment writes nothing more.
 * Calls made outside a poller's invocation pass through untouched.
 */
export function guardResultsRepository(repository: ResultsRepository, options: ChaosOptions): ResultsRepository {
  if (!(options.crashRate >= 0 && options.crashRate <= 1))
    throw new RangeError(`crashRate must be within 0-1, got ${options.crashRate}`);
  // A proxy rather than an object literal: methods the repository gains later are guarded too.
  return new Proxy(repository, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function' || property === 'get') return value;
      const method = value as (...args: unknown[]) => unknown;
      return (...args: unknown[]) => {
        const invocation = currentInvocation();
        const idKey = solverIdKeyOf(property, args);
        if (idKey !== undefined && invocation !== undefined) options.ids?.ask(idKey, invocation, String(args[0]));
        if (invocation?.dead) return never();
        const crash =
          (property === 'complete' || property === 'park') &&
          invocation !== undefined &&
          options.crashRate > 0 &&
          options.random() < options.crashRate;
        // At the solved record's write, before it: the task comes back and is resumed by its id.
        if (crash && property === 'complete') {
          invocation.kill('crash');
          options.onCrash?.(String(args[0]));
          return never();
        }
        const result = method.apply(target, args);
        if (idKey !== undefined)
          void Promise.resolve(result).then(
            (written) => (written === true ? options.ids?.keep(idKey) : undefined),
            () => undefined,
          );
        // At the parking write, once it has committed: the parking write is also the first write of
        // the submission's id (recordSolverId's, in the waiting design, which this chaos never cuts
        // off either), so the crash lands where the waiting design's lands: the id is kept, the
        // invocation dies before it hands the message on.
        if (crash && property === 'park')
          return Promise.resolve(result).then(() => {
            invocation.kill('crash');
            options.onCrash?.(String(args[0]));
            return never();
          });
        return result;
      };
    },
  });
}

/** What the dead-request guard needs of an SDK v3 client. */
interface SdkClient {
  middlewareStack: { add(middleware: unknown, options: { step: 'deserialize'; name: string }): void };
}

/**
 * An AWS SDK client (SQS, DynamoDB; the document client shares the DynamoDB client's stack) that
 * sends nothing for a dead invocation, its retries included: Lambda stops the whole environment,
 * so a call whose attempt failed as the invocation died is not retried behind the next
 * delivery's back. Checked per attempt (the deserialize step runs inside the retry loop); an
 * attempt already sent still lands, as a request on the wire does. Calls made outside a poller's
 * invocation (the governor, the producer) pass untouched.
 */
export function guardDeadInvocationRequests(client: SdkClient): void {
  const guard =
    (next: (args: unknown) => Promise<unknown>) =>
    (args: unknown): Promise<unknown> =>
      currentInvocation()?.dead ? never() : next(args);
  client.middlewareStack.add(guard, { step: 'deserialize', name: 'deadInvocationGuard' });
}

export interface RandomCrashOptions {
  /** Crashes per second of invocation time (a constant hazard): an invocation of `t` s dies with probability 1 − e^(−rate·t). */
  perSecond: number;
  random: Random;
  /** Told of each kill. */
  onCrash?: () => void;
}

/**
 * Crashes at random moments, as out-of-memory kills and runtime faults strike: called at the start
 * of each invocation (inside it) with the handler's promise, it draws the moment the invocation
 * dies (exponential, `perSecond`) and kills it then unless it has ended first. Nothing in the
 * consumer is special to it: the kill lands wherever the code is at that moment.
 */
export function crashAtRandomMoments(options: RandomCrashOptions): (running: Promise<unknown>) => void {
  if (!(options.perSecond >= 0)) throw new RangeError(`perSecond must be 0 or more, got ${options.perSecond}`);
  return (running) => {
    const invocation = currentInvocation();
    if (invocation === undefined || options.perSecond === 0) return;
    const afterMs = (-Math.log(1 - options.random()) / options.perSecond) * 1000;
    const timer = setTimeout(() => {
      if (invocation.dead) return;
      invocation.kill('crash');
      options.onCrash?.();
    }, afterMs);
    void running.then(
      () => clearTimeout(timer),
      () => clearTimeout(timer),
    );
  };
}

/** A promise that never settles: the caller's invocation is gone. */
function never<T>(): Promise<T> {
  return new Promise<T>(() => undefined);
}
