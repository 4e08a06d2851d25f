import { describe, expect, it } from 'vitest';
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import {
  createKeyedSolver,
  createSolverKeyLoader,
  keyFromSecretString,
  SOLVER_KEY_UNUSABLE,
  SolverKeyError,
} from '../../functions/adapters/solver-key.js';
import { SolverAccountError } from '../../functions/core/solver-protocol.js';
import { SOLVER_KEY_PLACEHOLDER } from '../../functions/core/deployment.js';

const KEY = '0123456789abcdef0123456789abcdef';
const ARN = 'arn:aws:secretsmanager:us-east-1:000000000000:secret:captcha-fleet/solver-key-AbCdEf';

/** A Secrets Manager client that answers from a script and counts its calls. */
function secrets(answer: () => Promise<{ SecretString?: string }>) {
  const client = {
    calls: 0,
    send: async () => {
      client.calls += 1;
      return answer();
    },
  };
  return client as typeof client & SecretsManagerClient;
}

describe('keyFromSecretString', () => {
  it('accepts the raw key or JSON {"key": ...}, trimmed', () => {
    expect(keyFromSecretString(`  ${KEY}\n`, ARN)).toBe(KEY);
    expect(keyFromSecretString(JSON.stringify({ key: KEY, note: 'plan 50' }), ARN)).toBe(KEY);
  });

  it('refuses unusable secrets without quoting them', () => {
    const broken = `{"key": "${KEY}"`; // JSON cut short: the parser would quote the text
    for (const secret of [broken, JSON.stringify({ apiKey: KEY }), JSON.stringify({ key: '' }), '   ']) {
      let thrown: unknown;
      try {
        keyFromSecretString(secret, ARN);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(SolverKeyError);
      expect((thrown as Error).message).toContain(ARN);
      expect((thrown as Error).message).not.toContain(KEY);
      expect(String((thrown as Error).cause ?? '')).not.toContain(KEY);
    }
  });
});

describe('a secret the operator never filled', () => {
  it('says how to put the key in instead of calling the solver with the placeholder', () => {
    expect(() => keyFromSecretString(SOLVER_KEY_PLACEHOLDER, ARN)).toThrow(
      /still holds the placeholder.*put-secret-value --secret-id arn:aws:secretsmanager/,
    );
  });
});

describe('createSolverKeyLoader', () => {
  it('reads the secret once per process', async () => {
    const client = secrets(async () => ({ SecretString: JSON.stringify({ key: KEY }) }));
    const load = createSolverKeyLoader({ source: { secretArn: ARN }, secretsManager: client });

    const keys = await Promise.all([load(), load(), load()]);

    expect(keys).toEqual([KEY, KEY, KEY]);
    expect(client.calls).toBe(1);
  });

  it('tries again after a failed read and names the secret, not the key', async () => {
    let fail = true;
    const client = secrets(async () => {
      if (fail) throw Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
      return { SecretString: KEY };
    });
    const load = createSolverKeyLoader({ source: { secretArn: ARN }, secretsManager: client });

    await expect(load()).rejects.toThrow(`could not read secret ${ARN}: ThrottlingException`);
    fail = false;
    await expect(load()).resolves.toBe(KEY);
    expect(client.calls).toBe(2);
  });

  it('refuses a binary secret', async () => {
    const load = createSolverKeyLoader({ source: { secretArn: ARN }, secretsManager: secrets(async () => ({})) });
    await expect(load()).rejects.toBeInstanceOf(SolverKeyError);
  });

  it('takes the key from the environment locally', async () => {
    await expect(createSolverKeyLoader({ source: { key: ` ${KEY} ` } })()).resolves.toBe(KEY);
    await expect(createSolverKeyLoader({ source: { key: ' ' } })()).rejects.toThrow('SOLVER_KEY is empty');
  });
});

describe('createKeyedSolver', () => {
  const outcome = {
    answer: 'ok',
    solverId: '1',
    acceptedAt: 0,
    answeredAt: 1,
    resultRequests: 1,
    retries: { overCap: 0, transient: 0 },
  };
  const fakeSolver = (key: string) => ({
    solve: async () => ({ ...outcome, answer: `solved with a ${key.length}-char key` }),
    getBalance: async () => 3,
    reportBad: async () => {},
    reportGood: async () => {},
  });

  it('turns an unset key into an account error (tasks wait, the governor pauses) and recovers once it is set', async () => {
    let secret = SOLVER_KEY_PLACEHOLDER;
    const client = secrets(async () => ({ SecretString: secret }));
    const solver = createKeyedSolver(
      createSolverKeyLoader({ source: { secretArn: ARN }, secretsManager: client }),
      fakeSolver,
    );
    const task = { id: 't1' } as never;
    const failing = solver.solve(task, { deadlineAt: Date.now() + 1000 });
    await expect(failing).rejects.toBeInstanceOf(SolverAccountError);
    await expect(failing).rejects.toMatchObject({ code: SOLVER_KEY_UNUSABLE, errorClass: 'account' });
    await expect(solver.getBalance()).rejects.toThrow(/placeholder/);

    secret = KEY;
    await expect(solver.solve(task, { deadlineAt: Date.now() + 1000 })).resolves.toMatchObject({
      answer: 'solved with a 32-char key',
    });
    await expect(solver.getBalance()).resolves.toBe(3);
    // Two failed reads, then one that worked and is kept.
    expect(client.calls).toBe(3);
  });

  it('passes the parked design’s calls through: a submission alone, and which submissions are ready', async () => {
    const client = secrets(async () => ({ SecretString: KEY }));
    const solver = createKeyedSolver(
      createSolverKeyLoader({ source: { secretArn: ARN }, secretsManager: client }),
      () => ({
        ...fakeSolver(KEY),
        submit: async () => ({ solverId: '42', acceptedAt: 7 }),
        pollMany: async (targets) => new Map(targets.map((t) => [t.solverId, { state: 'ready' as const }])),
      }),
    );
    await expect(solver.submit?.({ id: 't2' } as never, { deadlineAt: Date.now() + 1000 })).resolves.toEqual({
      solverId: '42',
      acceptedAt: 7,
    });
    const states = await solver.pollMany?.([{ solverId: '42', method: 'base64' }]);
    expect(states?.get('42')).toEqual({ state: 'ready' });
  });
});
