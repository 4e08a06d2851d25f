/**
 * A protocol-faithful stand-in for the solver API (2captcha's in.php / res.php, as CaptchaAI
 * speaks it): unmodified third-party clients work against it when pointed at its URL. It models
 * what the fleet must respect — the plan's threads, other users of the key, the balance, slow
 * and failing solves, transient errors, outages — and counts what the fleet did, so tests can prove the
 * invariants ("never above the cap", "solved once", "no polling loss").
 */
import type { Server } from 'node:http';
import {
  type PaidSubmission,
  SolverSimModel,
  type SimRequest,
  type SimResponse,
  type SimTaskInfo,
  type SolverSimStats,
} from './model.js';
import type { ResolvedSolverSimOptions, SolverSimOptions, SolverSimUpdate } from './options.js';
import { createSimServer, listen } from './server.js';

export { SolverSimModel } from './model.js';
export type { PaidSubmission, SimRequest, SimResponse, SimTaskInfo, SolverSimStats } from './model.js';
export {
  DEFAULT_SOLVE_TIMES,
  OutageWindowSchema,
  SolverSimConfigError,
  SolverSimOptionsSchema,
  TRANSIENT_KINDS,
  type OutageWindow,
  type ResolvedSolverSimOptions,
  type SolveTimeSpec,
  type SolverSimOptions,
  type SolverSimUpdate,
  type TransientKind,
} from './options.js';

/** A running (or ready to run) simulator. */
export interface SolverSimulator {
  /**
   * Start the HTTP server. `port` 0 picks a free one.
   * @returns the base URL; in.php is `${url}/in.php`, res.php `${url}/res.php`, stats `${url}/stats`.
   */
  listen(port?: number, host?: string): Promise<{ url: string }>;
  /** Stop the server and drop open connections. Safe to call twice. */
  close(): Promise<void>;
  /** Counters now (the same object GET /stats returns). */
  stats(): SolverSimStats;
  /** Change options while running (threads, foreign threads, balance, rates, latency, key...). */
  update(partial: SolverSimUpdate): void;
  /** Zero the counters; tasks in flight keep their threads. */
  resetStats(): void;
  /** The options in force (balance is the current balance). */
  options(): ResolvedSolverSimOptions;
  /** One task's state and timing; undefined for unknown ids. */
  taskInfo(id: number): SimTaskInfo | undefined;
  /** Paid submissions' ids by task signature (see SolverSimModel.paidSubmissions). */
  paidSubmissions(): Map<string, PaidSubmission[]>;
  /** Held answers an outage stretched past their request (see SolverSimModel.answersCutInOutages). */
  answersCutInOutages(): Set<string>;
  /** Answer one request without HTTP (the lab and unit tests may drive the model directly). */
  handle(request: SimRequest): SimResponse;
  /** Base URL once listening. */
  readonly url: string | undefined;
}

/**
 * Create a simulator.
 * @throws SolverSimConfigError listing every bad option.
 * @example
 * const sim = createSolverSimulator({ seed: 7, planThreads: 5, medianMs: 50 });
 * const { url } = await sim.listen();
 * // point any 2captcha client at `${url}/in.php` and `${url}/res.php`
 * await sim.close();
 */
export function createSolverSimulator(options: SolverSimOptions = {}): SolverSimulator {
  const model = new SolverSimModel(options);
  let server: Server | undefined;
  let url: string | undefined;
  return {
    async listen(port = 0, host = '127.0.0.1') {
      if (server) throw new Error(`solver simulator already listening at ${url}`);
      server = createSimServer(model);
      url = await listen(server, port, host);
      return { url };
    },
    async close() {
      const running = server;
      server = undefined;
      url = undefined;
      if (!running) return;
      await new Promise<void>((resolve, reject) => {
        running.close((error) => (error ? reject(error) : resolve()));
        running.closeAllConnections();
      });
    },
    stats: () => model.stats(),
    update: (partial) => model.update(partial),
    resetStats: () => model.resetStats(),
    options: () => model.current(),
    taskInfo: (id) => model.taskInfo(id),
    paidSubmissions: () => model.paidSubmissions(),
    answersCutInOutages: () => model.answersCutInOutages(),
    handle: (request) => model.handle(request),
    get url() {
      return url;
    },
  };
}
