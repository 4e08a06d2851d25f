/**
 * The simulator's HTTP server and CapSolver's held answers: an image task is answered in the
 * createTask response once recognized, and a client that closed the request before then never
 * receives the answer, its id in it. When an outage stretched that recognition the simulator
 * names the task (`answersCutInOutages`), which the local run's accounting reads as an id the
 * protocol lost (docs/consumer.md, "What remains: the protocol's window").
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { createSolverSimulator, type SolverSimulator } from '../../local/solver-sim/index.js';

const KEY = '0123456789abcdef0123456789abcdef';
const IMAGE_TASK = { type: 'ImageToTextTask', body: Buffer.alloc(300, 7).toString('base64') };

describe("the simulator's server, a held answer the client gave up on", () => {
  let sim: SolverSimulator | undefined;
  afterEach(async () => sim?.close());

  async function createTask(url: string, timeoutMs: number): Promise<Record<string, unknown> | 'aborted'> {
    try {
      const response = await fetch(`${url}/createTask`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ clientKey: KEY, task: IMAGE_TASK }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      return (await response.json()) as Record<string, unknown>;
    } catch (error) {
      if ((error as Error).name === 'TimeoutError') return 'aborted';
      throw error;
    }
  }

  it('names the task when an outage held its answer past the request, and not when the answer was delivered', async () => {
    // Prepare: recognitions of about 100 ms; the service goes down 400 ms after the start, for 700 ms.
    const start = Date.now();
    sim = createSolverSimulator({
      dialect: 'capsolver',
      seed: 5,
      medianMs: 100,
      latencyScale: 1,
      outages: [{ startMs: 400, durationMs: 700 }],
    });
    const { url } = await sim.listen();
    // Act: one client waits for its answer before the outage; the next, sent just before it, gives up in it.
    const delivered = await createTask(url, 5_000);
    await sleep(Math.max(0, start + 330 - Date.now()));
    const cut = await createTask(url, 300);
    // The held answer is written (or not) once the outage is over and the recognition done.
    await sleep(Math.max(0, start + 1_600 - Date.now()));
    // Assess: the first answered with its solution; the second paid and never received, named once.
    expect(delivered).toMatchObject({ errorId: 0, status: 'ready' });
    expect(cut).toBe('aborted');
    expect(sim.stats().solved).toBe(2);
    const named = sim.answersCutInOutages();
    expect(named.size).toBe(1);
    expect(named.has(String(delivered === 'aborted' ? '' : delivered.taskId))).toBe(false);
  });
});
