/**
 * The papercuts a new user hit (issue 20), each as the user meets it: the real CLI (or npm, or
 * the producer library) in a child process, with a shell's environment and nothing of this test's.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { flagsNpmKept } from '../../bin/commands/npm-flags.js';
import { START_OPTIONS } from '../../bin/commands/start.js';
import { localStack } from '../../clients/index.js';
import { writeLocalStackFile } from '../../local/stack-file.js';
import { run } from '../helpers/processes.js';
import { ROOT } from '../infra/synth-helpers.js';

const TSX = join(ROOT, 'node_modules/.bin/tsx');
const dir = mkdtempSync(join(tmpdir(), 'captcha-fleet-papercuts-'));

/** A user's shell: PATH and HOME, no AWS settings, no fleet environment. */
const shell = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  ...extra,
});
const cli = (args: string[], env: NodeJS.ProcessEnv = shell()) =>
  run(TSX, ['bin/captcha-fleet.ts', ...args], ROOT, env, 60_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('start --serve with a stack file it cannot write', () => {
  it('exits 1 before the demo, naming the path, the reason and CAPTCHA_FLEET_STACK_FILE', async () => {
    // Before: the whole demo ran, then `captcha-fleet: Error: EEXIST: file already exists, mkdir …`, nothing served.
    const file = join(dir, 'a-file');
    writeFileSync(file, 'not a folder');
    const result = await cli(
      ['start', '--serve', '--tasks', '5'],
      shell({ CAPTCHA_FLEET_STACK_FILE: join(file, 'stack.json') }),
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`cannot write the local stack's file ${join(file, 'stack.json')}`);
    expect(result.stderr).toContain('a part of its folder is a file');
    expect(result.stderr).toContain('CAPTCHA_FLEET_STACK_FILE');
    expect(result.stdout).not.toContain('Summary');
  });
});

describe('governor --once without the stack’s environment', () => {
  it('exits 2, names what is missing and points at --local and at the deployed governor’s variables', async () => {
    const result = await cli(['governor', '--once', '--dry-run']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('TASKS_QUEUE_URL');
    expect(result.stderr).toContain('add --local');
    expect(result.stderr).toContain('get-function-configuration');
  });

  it('names LEASES_TABLE for a parked fleet, and refuses --watch for a waiting one, before any call', async () => {
    // Before: without LEASES_TABLE a parked fleet's tick paused the mappings, left the lease slots
    // open and watched nothing, exit 0 and no word; --watch on a waiting fleet watched 0 rounds.
    const variables = {
      TASKS_QUEUE_URL: 'http://127.0.0.1:9/000000000000/f-tasks',
      DLQ_URL: 'http://127.0.0.1:9/000000000000/f-tasks-dlq',
      RESULTS_TABLE: 'f-results',
      GOVERNOR_TABLE: 'f-governor',
      EVENT_SOURCE_MAPPING_IDS: JSON.stringify({ normal: 'uuid-n' }),
      CONSUMER_FUNCTION_NAME: 'f-consumer',
      SOLVER_KEY: '0123456789abcdef0123456789abcdef',
    };
    const parked = await cli(['governor', '--once', '--dry-run'], shell(variables));
    expect(parked.code).toBe(2);
    expect(parked.stderr).toMatch(/^error: this fleet parks its tasks .*needs LEASES_TABLE/);
    const waiting = await cli(
      ['governor', '--once', '--watch', '5'],
      shell({ ...variables, CAPTCHA_FLEET_CONFIG: JSON.stringify({ solveMode: 'wait' }) }),
    );
    expect(waiting.code).toBe(2);
    expect(waiting.stderr).toMatch(/^error: --watch records parked tasks, and this fleet waits through its solves/);
  });

  it('prints JSON with --json when the tick fails, and the warnings on the way without it (exit 1 both)', async () => {
    // Before: a tick that failed (here every endpoint refuses) printed nothing on stdout with
    // --json, and without it dropped the warnings that said why.
    const refusing = shell({
      TASKS_QUEUE_URL: 'http://127.0.0.1:9/000000000000/f-tasks',
      DLQ_URL: 'http://127.0.0.1:9/000000000000/f-tasks-dlq',
      RESULTS_TABLE: 'f-results',
      GOVERNOR_TABLE: 'f-governor',
      LEASES_TABLE: 'f-leases',
      EVENT_SOURCE_MAPPING_IDS: JSON.stringify({ normal: 'uuid-n' }),
      CONSUMER_FUNCTION_NAME: 'f-consumer',
      SOLVER_KEY: '0123456789abcdef0123456789abcdef',
      CAPTCHA_FLEET_CONFIG: JSON.stringify({ solverBaseUrl: 'http://127.0.0.1:9' }),
      AWS_ENDPOINT_URL: 'http://127.0.0.1:9',
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'test',
      AWS_SECRET_ACCESS_KEY: 'test',
    });
    const json = await cli(['governor', '--once', '--json'], refusing);
    expect(json.code).toBe(1);
    const printed = JSON.parse(json.stdout) as { failed: string; warnings: string[] };
    expect(printed.failed).toMatch(/event source mapping uuid-n.*ECONNREFUSED/);
    expect(printed.warnings.some((w) => w.startsWith('queue attributes read failed'))).toBe(true);
    expect(json.stderr).toMatch(
      /^captcha-fleet: ActuatorError: could not read the normal lane's event source mapping/m,
    );
    const text = await cli(['governor', '--once'], refusing);
    expect(text.code).toBe(1);
    expect(text.stdout).toBe('');
    expect(text.stderr).toMatch(/^warning: queue attributes read failed/m);
    for (const out of [json.stdout, json.stderr, text.stderr]) expect(out).not.toContain('0123456789abcdef');
  });

  it('without --once is a usage error: exit 2, like every other', async () => {
    const result = await cli(['governor', '--dry-run', '--local']);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^error: only `governor --once` runs from the CLI \(add --once\)/);
  });
});

describe('a usage error', () => {
  it('prints the error first and a pointer to --help, not the whole help', async () => {
    const result = await cli(['start', '--bogus']);
    expect(result.code).toBe(2);
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines[0]).toBe("error: unknown option '--bogus'");
    expect(lines.length).toBeLessThanOrEqual(3);
    expect(result.stderr).toContain('`captcha-fleet start --help`');
    expect(result.stdout).toBe('');
  });

  it('`start --tasks 0` without --serve says there is nothing to run, where it ended without a summary', async () => {
    const result = await cli(['start', '--tasks', '0', '--json']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--tasks 0 sends no task, so this run would do nothing');
    expect(result.stderr).toContain('add --serve');
    expect(result.stdout).toBe('');
  });

  it('points npm users at `npm start -- --help`', async () => {
    const result = await cli(['start', '--bogus'], shell({ npm_lifecycle_event: 'start' }));
    expect(result.stderr).toContain('`npm start -- --help`');
  });
});

describe('a second `start --serve` of the same fleet', () => {
  it('fails at once, before any demo, naming the stack that serves', async () => {
    // Prepare: this test process plays the stack already serving.
    const stackFile = join(dir, 'serving.json');
    writeLocalStackFile(
      {
        version: 1,
        pid: process.pid,
        startedAt: Date.now(),
        prefix: 'captcha-fleet',
        sqsEndpoint: 'http://127.0.0.1:1',
        dynamoEndpoint: 'http://127.0.0.1:2',
        solverUrl: undefined,
        controlUrl: undefined,
        queueUrls: { normal: 'n', high: 'h', dlq: 'd' },
        tables: { results: 'r', governor: 'g' },
      },
      stackFile,
    );

    // Act
    const started = Date.now();
    const result = await cli(['start', '--serve', '--tasks', '200'], shell({ CAPTCHA_FLEET_STACK_FILE: stackFile }));

    // Assess
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`already serving (pid ${process.pid}`);
    expect(result.stderr).toContain(stackFile);
    expect(result.stdout).not.toContain('Summary');
    expect(result.stdout).not.toContain('captcha-fleet local:');
    expect(Date.now() - started).toBeLessThan(30_000);
  });
});

describe('`npm start --serve` (without `--`)', () => {
  it('stops and says what to type, instead of running the plain demo', async () => {
    const result = await run('npm', ['start', '--serve'], ROOT, shell(), 60_000);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('type `npm start -- --serve`');
    expect(result.stdout).not.toContain('captcha-fleet local:');
  });

  it('explains a misspelt flag npm kept, whose value it passed on as an argument', async () => {
    // Before: only "too many arguments for 'start'", naming neither the spelling nor the `--`.
    const result = await run('npm', ['start', '--taks', '5'], ROOT, shell(), 60_000);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("too many arguments for 'start'");
    expect(result.stderr).toContain('a misspelt one, npm keeps and passes its value on as an argument');
    expect(result.stdout).not.toContain('captcha-fleet local:');
  });

  it('knows the flags npm keeps, with their values where npm kept them', () => {
    const env = {
      npm_lifecycle_event: 'start',
      npm_config_serve: 'true',
      npm_config_plan_threads: '3',
      npm_config_tasks: 'true',
    };
    expect(flagsNpmKept(START_OPTIONS, 'start', env)).toEqual(['--tasks <n>', '--plan-threads 3', '--serve']);
    expect(flagsNpmKept(START_OPTIONS, 'start', { ...env, npm_lifecycle_event: 'test' })).toEqual([]);
  });
});

describe('the target flags of status, redrive and report', () => {
  // Before, `status --endpoint bogus` failed later as a missing queue, and beside --local it was ignored.
  it.each([
    [
      ['status', '--endpoint', 'bogus'],
      "option '--endpoint <url>' argument 'bogus' is invalid. expected an http(s) URL",
    ],
    [
      ['redrive', '--local', '--endpoint', 'http://127.0.0.1:1'],
      "option '--endpoint <url>' cannot be used with option '--local'",
    ],
    [['governor', '--once', '--local', '--watch', '2'], 'runs only on a deployed fleet, not with --local'],
  ])('%j is a usage error that names the flag', async (args, message) => {
    const result = await cli(args, shell({ CAPTCHA_FLEET_STACK_FILE: join(dir, 'none.json') }));
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(message);
  });
});

describe('the hints say what exists where they are read', () => {
  it('from the producer library: its options, no flags', () => {
    const read = () => localStack({ stackFile: join(dir, 'missing.json') });
    expect(read).toThrow(/localStack\(\{ stackFile \}\)/);
    expect(read).not.toThrow(/--prefix|--region|--local/);
  });

  it('from `governor --once --local`, which has no --prefix or --region', async () => {
    const result = await cli(
      ['governor', '--once', '--local'],
      shell({ CAPTCHA_FLEET_STACK_FILE: join(dir, 'none.json') }),
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('no local stack found');
    expect(result.stderr).not.toMatch(/--prefix|--region/);
  });

  it('from `status --local`, which has them', async () => {
    const result = await cli(['status', '--local'], shell({ CAPTCHA_FLEET_STACK_FILE: join(dir, 'none.json') }));
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('drop --local to reach a deployed fleet (--prefix, --region, --endpoint)');
  });
});

describe("the SDK's Node.js-version notice", () => {
  // The notice appears on Node.js < 22: the child pretends to be 20.
  const pretend20 = `data:text/javascript,${encodeURIComponent("Object.defineProperty(process, 'version', { value: 'v20.20.2' });")}`;
  const node = (code: string) =>
    run(process.execPath, ['--import', pretend20, '--import', 'tsx', '--input-type=module', '-e', code], ROOT, {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
    });

  it("is not printed by the producer's clients, and the switch is left as it was", async () => {
    const result = await node(
      "const { createAwsClients } = await import('./clients/index.ts'); createAwsClients({ endpoint: 'http://127.0.0.1:1' }); console.log(String(process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED));",
    );
    expect(result.stderr).toBe('');
    expect(result.stdout.trim()).toBe('undefined');
  });

  it('is what a bare SDK client prints there (the check above can see it)', async () => {
    const result = await node(
      "const { SQSClient } = await import('@aws-sdk/client-sqs'); new SQSClient({ region: 'us-east-1' });",
    );
    expect(result.stderr).toContain('NodeVersionSupportWarning');
  });
});

describe('report with a wrong verdict or task id', () => {
  it('is a usage error: exit 2, naming what it takes, before any fleet is reached', async () => {
    const verdict = await cli(['report', 'order-42', 'wrong']);
    expect(verdict.code).toBe(2);
    expect(verdict.stderr).toContain(
      "error: command-argument value 'wrong' is invalid for argument 'verdict'. Allowed choices are bad, good.",
    );
    const id = await cli(['report', 'not an id', 'bad']);
    expect(id.code).toBe(2);
    expect(id.stderr).toContain('error: "not an id" is not a task id');
    // The command's own usage errors point at its help, not at the list of commands.
    expect(id.stderr).toContain('`captcha-fleet report --help`');
  });

  it.each([
    [['report', '--timeout', '0', 'order-42', 'bad'], "option '--timeout <seconds>' argument '0' is invalid"],
    [['status', '--window', 'abc'], "option '--window <minutes>' argument 'abc' is invalid"],
    [['status', '--watch', '0'], "option '--watch [seconds]' argument '0' is invalid"],
  ])('%j is refused by its parser, with the error prefix and the command’s help', async (args, message) => {
    const result = await cli(args);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`error: ${message}`);
    expect(result.stderr).toContain(`\`captcha-fleet ${args[0]} --help\``);
  });
});
