/**
 * The solver the handlers use: the undici client, keyed lazily from the environment's key source
 * (Secrets Manager in AWS, SOLVER_KEY locally). One place for the consumer and the governor.
 */
import { ENV, type FleetEnvironment } from '../core/environment.js';
import { createAdaptivePollSchedule, type PollSchedule, withEarliestPoll } from '../core/poll-schedule.js';
import type { SolverPort } from '../core/ports.js';
import type { SolverProvider } from '../core/provider.js';
import { ConfigError } from '../core/settings.js';
import { createSolverClient, type SolverLogger, type SolverRetryOptions } from './solver-client.js';
import { createKeyedSolver, keyLoaderOf } from './solver-key.js';

/**
 * @param provider whose solver: the plan's (`solverBaseUrl`, `dialect`, `solverProtocol`, `solverSoftId`,
 *   `solverPricesUsd`, the solver key) or the overflow provider's (`overflow.baseUrl`, `.dialect`,
 *   `.solverProtocol`, `.softId`, `.pricesUsd`, the overflow key). @default the environment's provider
 * @param schedule the client's poll schedule. @default the adaptive schedule from the protocol's
 *   defaults; the overflow provider's never asks for an answer before `overflow.minSolveSeconds`
 *   (its budget's bound on solves per slot, kept by construction: see `withEarliestPoll`)
 * @throws ConfigError when the provider asked for has no key in this environment (or, for the
 *   overflow provider, no configuration)
 */
export function solverFromEnvironment(
  environment: FleetEnvironment,
  region: string,
  logger?: SolverLogger,
  retry?: Partial<SolverRetryOptions>,
  provider: SolverProvider = environment.provider ?? 'primary',
  schedule?: PollSchedule,
): SolverPort {
  const target = solverTarget(environment, provider);
  const overflow = environment.settings.overflow;
  const pollSchedule =
    provider === 'overflow' && overflow !== undefined
      ? withEarliestPoll(schedule ?? createAdaptivePollSchedule(), overflow.minSolveSeconds * 1000)
      : schedule;
  // The process's one read of this key (the redactor's and the other solvers' too).
  const loadKey = keyLoaderOf(target.keySource, region, environment.endpoint);
  return createKeyedSolver(loadKey, (key) =>
    createSolverClient({
      baseUrl: target.baseUrl,
      key,
      dialect: target.dialect,
      protocol: target.protocol,
      ...(target.softId !== undefined ? { softId: target.softId } : {}),
      ...(target.prices !== undefined ? { prices: target.prices } : {}),
      ...(logger ? { logger } : {}),
      ...(retry ? { retry } : {}),
      ...(pollSchedule ? { schedule: pollSchedule } : {}),
    }),
  );
}

/** Where a provider's solver lives and where its key comes from. */
function solverTarget(environment: FleetEnvironment, provider: SolverProvider) {
  const { settings } = environment;
  if (provider === 'primary') {
    const keySource = environment.solverKeySource;
    if (keySource === undefined) {
      throw new ConfigError([
        {
          field: ENV.solverKeySecretArn,
          problem: 'the primary provider is asked for but this environment holds no primary key',
          fix: `set ${ENV.solverKeySecretArn} (AWS) or ${ENV.solverKey} (local); an overflow consumer never solves through the primary`,
        },
      ]);
    }
    return {
      baseUrl: settings.solverBaseUrl,
      dialect: settings.dialect,
      protocol: settings.solverProtocol,
      softId: settings.solverSoftId,
      prices: settings.solverPricesUsd,
      keySource,
    };
  }
  const overflow = settings.overflow;
  const keySource = environment.overflowKeySource;
  if (overflow === undefined || keySource === undefined) {
    throw new ConfigError([
      {
        field: overflow === undefined ? 'overflow' : ENV.overflowKeySecretArn,
        problem:
          overflow === undefined
            ? 'the overflow provider is asked for but the configuration has no overflow block'
            : 'the overflow provider has no key source',
        fix:
          overflow === undefined
            ? 'add the overflow block to the fleet configuration'
            : `set ${ENV.overflowKeySecretArn} (AWS) or ${ENV.overflowKey} (local)`,
      },
    ]);
  }
  return {
    baseUrl: overflow.baseUrl,
    dialect: overflow.dialect,
    protocol: overflow.solverProtocol,
    softId: overflow.softId,
    prices: overflow.pricesUsd,
    keySource,
  };
}
