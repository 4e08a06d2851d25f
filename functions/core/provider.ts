/**
 * Which solver a consumer speaks to: the plan the fleet is built around (`primary`), or the
 * pay-per-solve provider the governor overflows to (`overflow`). The same consumer code runs
 * for both; the provider picks its solver (base URL, dialect, key), its metrics' service
 * dimension, its thread ledger and what each result records. Pure constants.
 */
import { OVERFLOW_LEDGER_ID, THREAD_LEDGER_ID } from './deployment.js';
import { SERVICES } from './metric-names.js';

export const PROVIDERS = ['primary', 'overflow'] as const;
export type SolverProvider = (typeof PROVIDERS)[number];

/** The `service` dimension of a consumer's metrics: the governor reads the primary's apart from the overflow's. */
export function consumerServiceOf(provider: SolverProvider): string {
  return provider === 'overflow' ? SERVICES.overflowConsumer : SERVICES.consumer;
}

/** The thread ledger item a consumer of this provider writes (the governor reads both). */
export function threadLedgerIdOf(provider: SolverProvider): string {
  return provider === 'overflow' ? OVERFLOW_LEDGER_ID : THREAD_LEDGER_ID;
}
