/**
 * The solver the handlers use: the undici client, keyed lazily from the environment's key source
 * (Secrets Manager in AWS, SOLVER_KEY locally). One place for the consumer and the governor.
 */
import type { FleetEnvironment } from '../core/environment.js';
import type { SolverPort } from '../core/ports.js';
import { createSolverClient, type SolverLogger, type SolverRetryOptions } from './solver-client.js';
import { createKeyedSolver, createSolverKeyLoader } from './solver-key.js';

export function solverFromEnvironment(
  environment: FleetEnvironment,
  region: string,
  logger?: SolverLogger,
  retry?: Partial<SolverRetryOptions>,
): SolverPort {
  const { settings } = environment;
  const loadKey = createSolverKeyLoader({
    source: environment.solverKeySource,
    region,
    ...(environment.endpoint ? { endpoint: environment.endpoint } : {}),
  });
  return createKeyedSolver(loadKey, (key) =>
    createSolverClient({
      baseUrl: settings.solverBaseUrl,
      key,
      dialect: settings.dialect,
      ...(logger ? { logger } : {}),
      ...(retry ? { retry } : {}),
    }),
  );
}
