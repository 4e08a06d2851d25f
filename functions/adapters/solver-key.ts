/**
 * The solver key: read once per cold start from Secrets Manager (AWS) or taken from the
 * environment (local). Errors name the source, never the key.
 */
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { FleetEnvironment, SolverKeySource } from '../core/environment.js';
import { SOLVER_KEY_PLACEHOLDER } from '../core/deployment.js';
import { onceUntilFailure } from '../core/once.js';
import type { SolverPort } from '../core/ports.js';
import type { SolverProvider } from '../core/provider.js';
import { SolverAccountError } from '../core/solver-protocol.js';
import { baseClientConfig } from './aws-clients.js';

/** The key could not be read or is unusable. The message names the secret, never its value. */
export class SolverKeyError extends Error {
  override readonly name = 'SolverKeyError';
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
  }
}

/** Pull the key out of a SecretString: the raw key, or JSON `{"key": "..."}`. */
export function keyFromSecretString(secretString: string, secretArn: string): string {
  const text = secretString.trim();
  if (text.startsWith('{')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      // The parser's message quotes the text (the key), so it is not passed on as the cause.
      throw new SolverKeyError(
        `secret ${secretArn} looks like JSON but does not parse; store the raw key or {"key": "..."}`,
      );
    }
    const key = (parsed as { key?: unknown }).key;
    if (typeof key !== 'string' || key.trim() === '') {
      throw new SolverKeyError(`secret ${secretArn} is JSON without a non-empty string "key" field`);
    }
    return key.trim();
  }
  if (text === '') throw new SolverKeyError(`secret ${secretArn} is empty`);
  if (text === SOLVER_KEY_PLACEHOLDER) {
    throw new SolverKeyError(
      `secret ${secretArn} still holds the placeholder the stack created: put the solver key in with ` +
        `\`aws secretsmanager put-secret-value --secret-id ${secretArn} --secret-string <your key>\``,
    );
  }
  return text;
}

export interface SolverKeyLoaderOptions {
  source: SolverKeySource;
  /** Built lazily when the source is a secret; pass one to share configuration or in tests. */
  secretsManager?: SecretsManagerClient;
  region?: string;
  endpoint?: string;
}

/**
 * A function that resolves the key, reading it at most once per process (cold start). A failed
 * read is not cached, so the next invocation tries again.
 */
export function createSolverKeyLoader(options: SolverKeyLoaderOptions): () => Promise<string> {
  return onceUntilFailure(() => load(options));
}

async function load(options: SolverKeyLoaderOptions): Promise<string> {
  const source = options.source;
  if ('key' in source) {
    if (source.key.trim() === '') throw new SolverKeyError('SOLVER_KEY is empty');
    return source.key.trim();
  }
  const region = options.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1';
  // Same configuration as the other clients: an emulator endpoint gets dummy credentials.
  const client = options.secretsManager ?? new SecretsManagerClient(baseClientConfig(options.endpoint, region));
  let secretString: string | undefined;
  try {
    const secret = await client.send(new GetSecretValueCommand({ SecretId: source.secretArn }));
    secretString = secret.SecretString;
  } catch (error) {
    throw new SolverKeyError(`could not read secret ${source.secretArn}: ${(error as Error).name}`, { cause: error });
  }
  if (secretString === undefined)
    throw new SolverKeyError(`secret ${source.secretArn} has no SecretString (binary secrets are not supported)`);
  return keyFromSecretString(secretString, source.secretArn);
}

/** Code the consumer records when the key cannot be read or is still the placeholder. */
export const SOLVER_KEY_UNUSABLE = 'SOLVER_KEY_UNUSABLE';

/**
 * A SolverPort that reads the key on first use (and again after a failed read), so a fleet
 * deployed before its key was set recovers by itself once the operator puts the key in. An
 * unusable key is an account error: the consumer leaves the task queued and counts it, and the
 * governor pauses — rather than whole batches failing their way to the DLQ.
 */
export function createKeyedSolver(loadKey: () => Promise<string>, build: (key: string) => SolverPort): SolverPort {
  let solver: SolverPort | undefined;
  const current = async (): Promise<SolverPort> => {
    if (solver) return solver;
    let key: string;
    try {
      key = await loadKey();
    } catch (error) {
      throw new SolverAccountError(SOLVER_KEY_UNUSABLE, { message: (error as Error).message });
    }
    solver = build(key);
    return solver;
  };
  return {
    solve: async (task, options) => (await current()).solve(task, options),
    submit: async (task, options) => {
      const inner = await current();
      if (inner.submit === undefined) throw new TypeError('this solver cannot submit alone');
      return inner.submit(task, options);
    },
    pollMany: async (targets, options) => {
      const inner = await current();
      if (inner.pollMany === undefined) throw new TypeError('this solver cannot poll many submissions');
      return inner.pollMany(targets, options);
    },
    getBalance: async (options) => (await current()).getBalance(options),
    reportBad: async (solverId, context) => (await current()).reportBad(solverId, context),
    reportGood: async (solverId, context) => (await current()).reportGood(solverId, context),
  };
}

/** Each key source's loader per region and endpoint: one per process (keyLoaderOf). */
const sharedLoaders = new WeakMap<SolverKeySource, Map<string, () => Promise<string>>>();

/**
 * The process's loader of `source`'s key, made on first ask: every solver, redactor and seal a
 * process wires from one environment shares it, so a cold start reads each secret once (the
 * governor's balance reader, probe, watch and redactor each made their own before: four reads
 * of one secret, the consumer's two or three). A failed read is not kept (createSolverKeyLoader).
 */
export function keyLoaderOf(source: SolverKeySource, region: string, endpoint?: string): () => Promise<string> {
  let byPlace = sharedLoaders.get(source);
  if (byPlace === undefined) {
    byPlace = new Map();
    sharedLoaders.set(source, byPlace);
  }
  const place = `${region} ${endpoint ?? ''}`;
  let loader = byPlace.get(place);
  if (loader === undefined) {
    loader = createSolverKeyLoader({ source, region, ...(endpoint ? { endpoint } : {}) });
    byPlace.set(place, loader);
  }
  return loader;
}

/** Where each provider's key comes from (a loader that reads it at most once). */
export type KeyLoaders = Partial<Record<SolverProvider, () => Promise<string>>>;

/**
 * The keys a process of the fleet holds: the primary provider's (`primary`: not the overflow
 * consumer) and the overflow provider's (a fleet with an overflow block), each read at most once.
 */
export function fleetKeyLoaders(environment: FleetEnvironment, region: string, primary: boolean): KeyLoaders {
  const loader = (source: SolverKeySource | undefined) =>
    source === undefined ? undefined : keyLoaderOf(source, region, environment.endpoint);
  const primaryKey = primary ? loader(environment.solverKeySource) : undefined;
  const overflow = environment.settings.overflow !== undefined ? loader(environment.overflowKeySource) : undefined;
  return { ...(primaryKey ? { primary: primaryKey } : {}), ...(overflow ? { overflow } : {}) };
}
