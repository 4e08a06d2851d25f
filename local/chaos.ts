/**
 * Chaos for the local runtime: invocations that die after solving and before recording, as a
 * Lambda timeout or an out-of-memory kill would. Works on the results repository, so the
 * consumer's own code runs unchanged (one code path) and its recovery is what gets tested:
 * the message returns after its visibility timeout, the next delivery takes the claim over and
 * resumes the solver submission whose id the claim recorded.
 */
import { Agent, type Dispatcher } from 'undici';
import type { ResultsRepository } from '../functions/core/ports.js';
import { currentInvocation } from './poller.js';
import type { Random } from './solver-sim/prng.js';

export interface ChaosOptions {
  /** Share (0-1) of `complete()` calls that kill their invocation instead of writing. */
  crashRate: number;
  /** Seeded so a run can be repeated. */
  random: Random;
  /** Told of each kill (the runtime counts them). */
  onCrash?: (taskId: string) => void;
  /**
   * Told when a dead invocation tries to record a solver id: the provider accepted a submission
   * whose answer reached an invocation already gone (a request in flight when it died), so no
   * delivery can know the id. The one way a crash can still cost a second payment.
   */
  onIdLost?: (taskId: string) => void;
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
        if (invocation?.dead) {
          if (property === 'recordSolverId') options.onIdLost?.(String(args[0]));
          return never();
        }
        if (
          property === 'complete' &&
          invocation !== undefined &&
          options.crashRate > 0 &&
          options.random() < options.crashRate
        ) {
          invocation.kill('crash');
          options.onCrash?.(String(args[0]));
          return never();
        }
        return method.apply(target, args);
      };
    },
  });
}

/** A promise that never settles: the caller's invocation is gone. */
function never<T>(): Promise<T> {
  return new Promise<T>(() => undefined);
}
