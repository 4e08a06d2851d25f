/**
 * What an AWS SDK error from DynamoDB or SQS means, as the ports word it (`StoreFailureKind`):
 * throttled, too large, or unavailable. One table for both stores' adapters, so the consumer and
 * the store-health signals read the same classes.
 */
import type { StoreFailureKind } from '../core/ports.js';

/** Error names the two services (and the SDK) use for throttling. */
const THROTTLED =
  /^(ProvisionedThroughputExceeded|Throttling|RequestLimitExceeded|RequestThrottled|TooManyRequests|SlowDown|OverLimit)/;

/** How DynamoDB (and dynalite) word an item over the limit. */
export const ITEM_TOO_LARGE = /item size (has )?exceeded|maximum allowed size/i;
/** How SQS (and its emulators) word a message over the queue's MaximumMessageSize. */
const MESSAGE_TOO_LARGE = /message must be shorter than|MessageTooLong|too long/i;

/** The class of a failed store call. Anything neither throttled nor too large is `unavailable`. */
export function storeFailureKind(error: unknown): StoreFailureKind {
  if (!(error instanceof Error)) return 'unavailable';
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  if (THROTTLED.test(error.name) || status === 429) return 'throttled';
  if (error.name === 'ValidationException' && ITEM_TOO_LARGE.test(error.message)) return 'too_large';
  if (/^(InvalidParameterValue|MessageTooLong)/.test(error.name) && MESSAGE_TOO_LARGE.test(error.message))
    return 'too_large';
  return 'unavailable';
}
