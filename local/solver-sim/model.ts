/**
 * The solver service's behaviour without HTTP: an account (balance, plan threads, threads of
 * other users of the key), tasks that take a seeded log-normal time to solve, and every answer
 * in.php and res.php give. The HTTP server (server.ts) only parses requests and writes replies.
 *
 * Time is read, never waited on: a task is final once the clock passes its `readyAt`, and every
 * request (and `stats()`) first settles the tasks whose time has come, in order. So a thread is
 * free exactly when its task is done, no timer has to be cleaned up, and a test may step a
 * hand-made clock instead of sleeping.
 *
 * Outage windows (options.outages) are read the same way: a request inside one answers HTTP 503,
 * and a task's `readyAt` is its solve time laid over the clock with every window skipped, so an
 * accepted task makes no progress while the service is down and resumes after.
 */
import {
  type Dialect,
  NO_FUNDS_CODE,
  overCapCode,
  SOLVER_KEY_LENGTH,
  type SolverMethod,
} from '../../functions/core/solver-protocol.js';
import type { Clock } from '../../functions/core/ports.js';
import { answerFor, SIM_USER_AGENT, type SimAnswer } from './answers.js';
import {
  badKeyCode,
  formatTaskId,
  JSON_API_METHODS,
  JsonReply,
  parseTaskId,
  readTaskObject,
  reportRoute,
  solutionOf,
  unknownTaskCode,
} from './json-api.js';
import { normal, pick, stream, type Random } from './prng.js';
import { checkSubmission, type UploadedFile } from './submission.js';
import {
  parseSimOptions,
  priceFor,
  solveTimeFor,
  type OutageWindow,
  type ResolvedSolverSimOptions,
  type SolverSimOptions,
  type SolverSimUpdate,
  type TransientKind,
} from './options.js';

/** One request to in.php, res.php or a JSON task API method, already parsed by the server. */
export interface SimRequest {
  /** `json`: a JSON task API method (createTask, getTaskResult, …), named by `jsonMethod`. */
  endpoint: 'in' | 'res' | 'json';
  /** Query and body parameters merged (the body wins); empty for `json`. */
  fields: Record<string, string>;
  /** The JSON API method: the last segment of the path (`createTask`). */
  jsonMethod?: string;
  /** The JSON API request body (an object; `{}` when it was not one). */
  body?: Readonly<Record<string, unknown>>;
  /** The `file` part of a multipart upload. */
  file?: UploadedFile;
  /** Client address, for the IP ban. */
  ip: string;
  /** The body could not be read: answer this code instead of looking at the fields. */
  parseError?: string;
}

/** What the server writes back. */
export interface SimResponse {
  status: number;
  contentType: string;
  body: string;
  /**
   * Hold the answer until this epoch ms, then write `complete()` instead: a CapSolver image task
   * is answered in the createTask response itself, once solved.
   */
  holdUntil?: number;
  complete?: () => SimResponse;
  /** Called when the held answer could not be written: the client had closed the request. */
  undelivered?: () => void;
}

/** Counters of a run (GET /stats returns the same object). */
export interface SolverSimStats {
  /** in.php calls, whatever their answer. */
  submissions: number;
  /** Submissions that became tasks. */
  accepted: number;
  solved: number;
  unsolvable: number;
  overCapRejections: number;
  noFundsRejections: number;
  /** in.php answers naming a bad or missing parameter. */
  parameterRejections: number;
  /** Requests refused for their key (missing, unknown, revoked). */
  keyRejections: number;
  /** Requests answered with an injected transient failure (any kind). */
  transientErrors: number;
  /** Requests answered HTTP 503 because they came inside an outage window. */
  outageAnswers: number;
  /** Whether the service is inside an outage window now. */
  inOutage: boolean;
  /** This key's threads held now (accepted, not yet solved or unsolvable). */
  threadsInUse: number;
  /** Threads other users of the key hold now. */
  foreignThreads: number;
  planThreads: number;
  /** Most of this key's own threads held at once. */
  peakThreads: number;
  /** Most threads held at once, other users' included. */
  peakThreadsTotal: number;
  /** Balance when the run (or the last `resetStats`) began, USD. */
  balanceStart: number;
  balance: number;
  /** Charged for solves, USD. */
  spent: number;
  /** res.php `action=get` requests. */
  resultRequests: number;
  /** CAPCHA_NOT_READY answers (each id of an `ids` request counts). */
  notReadyAnswers: number;
  /** Solved tasks whose answer was read at least once. */
  answersDelivered: number;
  /** Mean time from an answer being ready to its first successful read, ms (polling loss). */
  meanAnswerWaitMs: number | null;
  /** Longest such wait, ms. */
  maxAnswerWaitMs: number | null;
  /** Successful reads per delivered answer (1 = each answer read once). */
  answerReadsPerTask: number | null;
  /** Result lookups (ids asked for) per task that was asked about. */
  pollsPerTask: number | null;
  /** Solves of the same method and parameters as an earlier solved task. */
  duplicateSolves: number;
  reportBad: number;
  reportGood: number;
  /** Bad reports refunded: the solve's price credited back to the balance. */
  refunds: number;
  /** USD credited back by refunds. */
  refundedUsd: number;
  /** Reports refused: unknown or forgotten id, past the report window, not solved, or reported already. */
  reportsRefused: number;
  /** Requests to the JSON task API (createTask, getTaskResult, getBalance, reports). */
  jsonApiRequests: number;
  /**
   * Every error answer by code; injected failures as ERROR_SERVER_ERROR, HTTP_500, HTML_PAGE,
   * outage answers as HTTP_503.
   */
  errorsByCode: Record<string, number>;
}

type TaskState = 'solving' | 'solved' | 'unsolvable';

/** What `taskInfo` tells about a task. */
/** A paid submission: the id it was accepted under (as the dialect issued it), and when (epoch ms by the model's clock). */
export interface PaidSubmission {
  id: string;
  acceptedAt: number;
}

export interface SimTaskInfo {
  id: number;
  method: SolverMethod;
  state: TaskState;
  /** Epoch ms the task was accepted. */
  acceptedAt: number;
  /** Epoch ms it is (or was) solved or found unsolvable; its thread is held until then. */
  readyAt: number;
  /** Result lookups of this id. */
  polls: number;
  /** Successful answer reads. */
  answerReads: number;
}

interface SimTask {
  id: number;
  method: SolverMethod;
  /** What the answer is built from (an image's body is dropped once its signature is taken). */
  params: Record<string, string>;
  signature: string;
  acceptedAt: number;
  /** Solve time the task needs while the service is up, ms. */
  workMs: number;
  readyAt: number;
  willFail: boolean;
  /** Charged on solve, micro-USD; reserved while solving so the balance cannot go below zero. */
  priceMicros: number;
  state: TaskState;
  polls: number;
  answerReads: number;
  reported?: 'bad' | 'good';
  /** The client address that created it (the JSON API reports it back as `ip`). */
  ip: string;
}

const MICROS = 1_000_000;
const toMicros = (usd: number) => Math.round(usd * MICROS);
const toUsd = (micros: number) => micros / MICROS;

/** Human text sent next to a code in `json=1` answers (the services add an `error_text`). */
const ERROR_TEXT: Readonly<Record<string, string>> = {
  ERROR_WRONG_USER_KEY: `The key is missing or malformed: it must be ${SOLVER_KEY_LENGTH} characters.`,
  ERROR_KEY_DOES_NOT_EXIST: 'The key does not exist.',
  ERROR_ZERO_BALANCE: 'No free threads or no money on the account.',
  ERROR_NO_SLOT_AVAILABLE: 'No slot available: the plan has no free thread.',
  ERROR_BAD_PARAMETERS: 'Required parameters are missing or malformed.',
  ERROR_PAGEURL: 'pageurl is missing.',
  ERROR_GOOGLEKEY: 'googlekey is missing or invalid.',
  ERROR_SITEKEY: 'sitekey is missing or invalid.',
  ERROR_ZERO_CAPTCHA_FILESIZE: 'The image is smaller than 100 bytes.',
  ERROR_TOO_BIG_CAPTCHA_FILESIZE: 'The image is larger than 100 kB.',
  ERROR_WRONG_FILE_EXTENSION: 'The file extension is not an image type.',
  ERROR_IMAGE_TYPE_NOT_SUPPORTED: 'The image could not be decoded.',
  ERROR_CAPTCHA_UNSOLVABLE: 'Workers could not solve the captcha.',
  ERROR_WRONG_CAPTCHA_ID: 'No captcha with this id.',
  ERROR_WRONG_ID_FORMAT: 'Captcha ids are digits only.',
  ERROR_EMPTY_ACTION: 'action is missing or unknown.',
  ERROR_SERVER_ERROR: 'Temporary server error, retry.',
  IP_BANNED: 'This IP is banned after too many requests with a wrong key.',
};

const HTML_PAGE =
  '<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n<body>\n<center><h1>502 Bad Gateway</h1></center>\n<hr><center>nginx</center>\n</body></html>\n';

/** What both protocols' replies can say before a request is dispatched. */
interface ProtocolReply {
  error(code: string): SimResponse;
  unavailable(): SimResponse;
  transient(kind: TransientKind): SimResponse;
}

/** The solver service: account, tasks and protocol answers. */
/** How long after a task is finished a report on it is taken, per dialect, ms (SolverSimOptions.reportWindowMs). */
const DEFAULT_REPORT_WINDOW_MS: Partial<Record<Dialect, number>> = { 'anti-captcha': 60_000, '2captcha': 900_000 };
/** How long after its acceptance a JSON API task's result can be asked for, per dialect, ms (SolverSimOptions.resultWindowMs). */
const DEFAULT_RESULT_WINDOW_MS: Partial<Record<Dialect, number>> = { 'anti-captcha': 300_000, capmonster: 300_000 };

export class SolverSimModel {
  private options: ResolvedSolverSimOptions;
  private readonly clock: Clock;
  /** Epoch ms the simulator was created: outage windows count from here. */
  private readonly startedAt: number;
  private balanceMicros = 0;
  private random!: { latency: Random; unsolvable: Random; transient: Random; ids: Random };
  private nextId = 0;
  private readonly tasks = new Map<number, SimTask>();
  /** Tasks still solving, i.e. the threads this key holds. */
  private pending: SimTask[] = [];
  /** Finished tasks in the order they finished (so by `readyAt`), for forgetting old ones. */
  private finished: SimTask[] = [];
  private finishedHead = 0;
  private readonly solvedSignatures = new Set<string>();
  /** Tasks whose held answer (their id in it) an outage stretched and the client never received. */
  private readonly cutInOutages = new Set<number>();
  private readonly badKeyRequestsByIp = new Map<string, number>();
  private readonly bannedUntilByIp = new Map<string, number>();
  private counters!: ReturnType<typeof emptyCounters>;

  constructor(input: SolverSimOptions = {}) {
    const { clock, ...rest } = input;
    this.options = parseSimOptions(rest);
    this.clock = clock ?? Date.now;
    this.startedAt = this.clock();
    this.balanceMicros = toMicros(this.options.balance);
    this.reseed();
    this.counters = emptyCounters(this.balanceMicros, 0);
  }

  /** The options in force. */
  current(): ResolvedSolverSimOptions {
    return { ...this.options, balance: toUsd(this.balanceMicros) };
  }

  /**
   * Change options while running. `balance` sets the balance now (a top-up or a drain); `seed`
   * restarts the random streams; thread changes apply to the next submission (held threads are
   * never revoked, as on the real service); new `outages` re-time the tasks still solving.
   */
  update(partial: SolverSimUpdate): void {
    this.settle(this.clock());
    const next = parseSimOptions({ ...this.options, balance: toUsd(this.balanceMicros), ...partial });
    const reseed = next.seed !== this.options.seed;
    this.options = next;
    if (partial.balance !== undefined) this.balanceMicros = toMicros(next.balance);
    if (reseed) this.reseed();
    if (partial.outages !== undefined) {
      for (const task of this.pending) task.readyAt = this.readyAtFor(task.acceptedAt, task.workMs);
    }
    this.notePeak();
  }

  /** Zero the counters; the balance now becomes `balanceStart`. Tasks and threads stay. */
  resetStats(): void {
    this.settle(this.clock());
    this.counters = emptyCounters(this.balanceMicros, this.pending.length);
    this.notePeak();
  }

  /** The counters now. */
  stats(): SolverSimStats {
    this.settle(this.clock());
    const c = this.counters;
    return {
      submissions: c.submissions,
      accepted: c.accepted,
      solved: c.solved,
      unsolvable: c.unsolvable,
      overCapRejections: c.overCapRejections,
      noFundsRejections: c.noFundsRejections,
      parameterRejections: c.parameterRejections,
      keyRejections: c.keyRejections,
      transientErrors: c.transientErrors,
      outageAnswers: c.outageAnswers,
      inOutage: this.inOutage(this.clock()),
      threadsInUse: this.pending.length,
      foreignThreads: this.options.foreignThreads,
      planThreads: this.options.planThreads,
      peakThreads: c.peakThreads,
      peakThreadsTotal: c.peakThreadsTotal,
      balanceStart: toUsd(c.balanceStartMicros),
      balance: toUsd(this.balanceMicros),
      spent: toUsd(c.spentMicros),
      resultRequests: c.resultRequests,
      notReadyAnswers: c.notReadyAnswers,
      answersDelivered: c.answersDelivered,
      meanAnswerWaitMs: c.answersDelivered === 0 ? null : c.answerWaitTotalMs / c.answersDelivered,
      maxAnswerWaitMs: c.answersDelivered === 0 ? null : c.answerWaitMaxMs,
      answerReadsPerTask: c.answersDelivered === 0 ? null : c.answerReads / c.answersDelivered,
      pollsPerTask: c.tasksPolled === 0 ? null : c.idLookups / c.tasksPolled,
      duplicateSolves: c.duplicateSolves,
      reportBad: c.reportBad,
      reportGood: c.reportGood,
      refunds: c.refunds,
      refundedUsd: toUsd(c.refundedMicros),
      reportsRefused: c.reportsRefused,
      jsonApiRequests: c.jsonApiRequests,
      errorsByCode: { ...c.errorsByCode },
    };
  }

  /** One task's state and timing (for tests and the lab); undefined for unknown ids. */
  taskInfo(id: number): SimTaskInfo | undefined {
    this.settle(this.clock());
    const task = this.tasks.get(id);
    if (!task) return undefined;
    return {
      id,
      method: task.method,
      state: task.state,
      acceptedAt: task.acceptedAt,
      readyAt: task.readyAt,
      polls: task.polls,
      answerReads: task.answerReads,
    };
  }

  /**
   * Accepted submissions the account pays for (solved, or still solving: not the unsolvable
   * ones), by the task's signature (method and parameters), each by the id it was accepted under:
   * more than one id is a task paid twice, each with when it was accepted. Tasks forgotten (`forgetAfterMs`) are not counted.
   * Each id as the dialect issued it (CapSolver's UUID), so it matches the ids the consumers learned.
   */
  paidSubmissions(): Map<string, PaidSubmission[]> {
    this.settle(this.clock());
    const { dialect, seed } = this.options;
    const paid = new Map<string, PaidSubmission[]>();
    for (const task of this.tasks.values()) {
      if (task.state === 'unsolvable') continue;
      const submission = { id: String(formatTaskId(dialect, seed, task.id)), acceptedAt: task.acceptedAt };
      paid.set(task.signature, [...(paid.get(task.signature) ?? []), submission]);
    }
    return paid;
  }

  /**
   * Ids of the tasks answered in their createTask response (CapSolver's images) whose answer, held
   * through the recognition, an outage stretched, and whose client had closed the request before
   * it came: accepted and paid (not found unsolvable), the id never reached the client
   * (docs/consumer.md, "What remains: the protocol's window"). Each as the dialect issued it, as
   * in `paidSubmissions`.
   */
  answersCutInOutages(): Set<string> {
    this.settle(this.clock());
    const { dialect, seed } = this.options;
    const paid = [...this.cutInOutages].filter((id) => this.tasks.get(id)?.state !== 'unsolvable');
    return new Set(paid.map((id) => String(formatTaskId(dialect, seed, id))));
  }

  /** Answer one in.php, res.php or JSON task API request. */
  handle(request: SimRequest): SimResponse {
    const now = this.clock();
    this.settle(now);
    const isJson = request.endpoint === 'json';
    const reply: ProtocolReply = isJson
      ? new JsonReply(this.options.dialect, this.counters.errorsByCode)
      : new Reply(
          request.fields.json === '1' || request.fields.json === 'true',
          this.options.jsonIdType,
          this.counters.errorsByCode,
        );
    this.countRequest(request);
    // A service that is down answers nothing else: not the key check, not the balance.
    if (this.inOutage(now)) {
      this.counters.outageAnswers++;
      return reply.unavailable();
    }

    const bannedUntil = this.bannedUntilByIp.get(request.ip);
    // CapMonster's ban is its own code (ERROR_IP_BANNED, its client's IP_BANNED); Anti-Captcha's
    // ERROR_IP_BLOCKED read as an unknown error there.
    const banned = !isJson
      ? 'IP_BANNED'
      : this.options.dialect === 'capmonster'
        ? 'ERROR_IP_BANNED'
        : 'ERROR_IP_BLOCKED';
    if (bannedUntil !== undefined && bannedUntil > now) return reply.error(banned);
    const key = isJson ? request.body?.clientKey : request.fields.key;
    const keyRefusal = this.keyRefusal(typeof key === 'string' ? key : '', isJson);
    if (keyRefusal !== undefined) {
      this.counters.keyRejections++;
      this.noteBadKey(request.ip, now);
      return reply.error(keyRefusal);
    }
    // Drawn for every authenticated request so the sequence of failures depends only on the
    // sequence of requests, not on what they asked for.
    if (this.random.transient() < this.options.transientErrorRate) {
      this.counters.transientErrors++;
      return reply.transient(pick(this.random.transient, this.options.transientKinds));
    }
    if (isJson) return this.handleJson(request, now, reply as JsonReply);
    const legacy = reply as Reply;
    if (request.parseError !== undefined) {
      if (request.endpoint === 'in') this.counters.parameterRejections++;
      return legacy.error(request.parseError);
    }
    return request.endpoint === 'in' ? this.submit(request, now, legacy) : this.result(request, now, legacy);
  }

  private countRequest(request: SimRequest): void {
    if (request.endpoint === 'json') {
      this.counters.jsonApiRequests++;
      if (request.jsonMethod === 'createTask') this.counters.submissions++;
      else if (request.jsonMethod === 'getTaskResult') this.counters.resultRequests++;
    } else if (request.endpoint === 'in') this.counters.submissions++;
    else if (request.fields.action === 'get') this.counters.resultRequests++;
  }

  /**
   * Why a key is refused, if it is: in.php / res.php check the shape first (a key that is not 32
   * characters is ERROR_WRONG_USER_KEY whatever else is true), then whether it exists; the JSON
   * API has one code for both (ERROR_KEY_DOES_NOT_EXIST; CapSolver's ERROR_KEY_DENIED_ACCESS).
   */
  private keyRefusal(key: string, json: boolean): string | undefined {
    const unknown = json ? badKeyCode(this.options.dialect) : 'ERROR_KEY_DOES_NOT_EXIST';
    if (key.length !== SOLVER_KEY_LENGTH) return json ? unknown : 'ERROR_WRONG_USER_KEY';
    if (this.options.badKey) return unknown;
    if (this.options.validKeys !== undefined && !this.options.validKeys.includes(key)) return unknown;
    return undefined;
  }

  private submit(request: SimRequest, now: number, reply: Reply): SimResponse {
    const check = checkSubmission(request.fields, request.file);
    if (!check.ok) {
      this.counters.parameterRejections++;
      return reply.error(check.code);
    }
    const { method, params, signature } = check.submission;
    const admitted = this.admit(method, params, signature, now, request.ip);
    return 'refusal' in admitted ? reply.error(admitted.refusal) : reply.ok(admitted.task.id);
  }

  /**
   * Take a task on, or refuse it for money or threads (both protocols): the price is set aside
   * while it solves, its thread held until its solve time.
   */
  private admit(
    method: SolverMethod,
    params: Record<string, string>,
    signature: string,
    now: number,
    ip: string,
  ): { task: SimTask } | { refusal: string } {
    const priceMicros = toMicros(priceFor(this.options, method));
    const reservedMicros = this.pending.reduce((sum, task) => sum + task.priceMicros, 0);
    const availableMicros = this.balanceMicros - reservedMicros;
    if (availableMicros <= 0 || availableMicros < priceMicros) {
      this.counters.noFundsRejections++;
      return { refusal: NO_FUNDS_CODE };
    }
    if (this.pending.length + this.options.foreignThreads + 1 > this.options.planThreads) {
      this.counters.overCapRejections++;
      return { refusal: overCapCode(this.options.dialect) };
    }
    const spec = solveTimeFor(this.options, method);
    // Both draws happen for every task so one option (say the median) never shifts the other.
    const z = normal(this.random.latency);
    const willFail = this.random.unsolvable() < this.options.unsolvableRate;
    const workMs = Math.max(0, Math.round(spec.medianMs * this.options.latencyScale * Math.exp(spec.spread * z)));
    // The image itself is not needed to rebuild the answer; keeping it would hold every upload.
    const { body: _image, ...answerParams } = params;
    const task: SimTask = {
      id: this.nextId++,
      method,
      params: answerParams,
      signature,
      acceptedAt: now,
      workMs,
      readyAt: this.readyAtFor(now, workMs),
      willFail,
      priceMicros,
      state: 'solving',
      polls: 0,
      answerReads: 0,
      ip,
    };
    this.tasks.set(task.id, task);
    this.pending.push(task);
    this.counters.accepted++;
    this.notePeak();
    this.settle(now);
    return { task };
  }

  private result(request: SimRequest, now: number, reply: Reply): SimResponse {
    const { action } = request.fields;
    switch (action) {
      case 'get':
        return request.fields.ids !== undefined
          ? this.getMany(request.fields.ids, now, reply)
          : this.getOne(request.fields.id, now, reply);
      case 'getbalance':
        return reply.text(formatUsd(this.balanceMicros));
      case 'reportbad':
      case 'reportgood':
        return this.report(request.fields.id, action === 'reportbad' ? 'bad' : 'good', now, reply);
      default:
        return reply.error('ERROR_EMPTY_ACTION');
    }
  }

  private getOne(rawId: string | undefined, now: number, reply: Reply): SimResponse {
    const lookup = this.lookup(rawId);
    if (typeof lookup === 'string') return reply.error(lookup);
    const answer = this.readAnswer(lookup, now);
    if (answer === 'CAPCHA_NOT_READY') return reply.notReady();
    if (answer === 'ERROR_CAPTCHA_UNSOLVABLE') return reply.error(answer);
    return reply.answer(answer.value, this.extendedAnswer(lookup, answer.value));
  }

  /**
   * What 2captcha's res.php adds to a `json=1` answer beside `request`: the worker's user agent
   * for Turnstile and hCaptcha, and hCaptcha's respKey.
   */
  private extendedAnswer(task: SimTask, answer: SimAnswer): Record<string, string> {
    if (this.options.dialect !== '2captcha') return {};
    if (task.method === 'turnstile') return { useragent: SIM_USER_AGENT };
    if (task.method === 'hcaptcha' && typeof answer === 'string')
      return { respKey: `E0_${answer.slice(-24)}`, useragent: SIM_USER_AGENT };
    return {};
  }

  /** One JSON task API request, past the outage, ban, key and chaos checks. */
  private handleJson(request: SimRequest, now: number, reply: JsonReply): SimResponse {
    const body = request.body ?? {};
    const name = request.jsonMethod ?? '';
    if (!JSON_API_METHODS.has(name)) return reply.error('ERROR_NO_SUCH_METHOD');
    switch (name) {
      case 'createTask':
        return this.createTask(body, now, reply, request.ip);
      case 'getTaskResult': {
        const task = this.jsonTask(body.taskId);
        const windowMs = this.options.resultWindowMs ?? DEFAULT_RESULT_WINDOW_MS[this.options.dialect];
        // Asked for past the provider's window: its id is unknown there (an hour before, on every dialect).
        return task === undefined || (windowMs !== undefined && now - task.acceptedAt > windowMs)
          ? reply.error(unknownTaskCode(this.options.dialect))
          : this.taskResult(task, now, reply);
      }
      case 'getBalance':
        return reply.ok({ balance: toUsd(this.balanceMicros) });
      default:
        return this.reportJson(name, body, now, reply);
    }
  }

  /** The task a JSON API task id names, if this service issued it and still knows it. */
  private jsonTask(rawId: unknown): SimTask | undefined {
    const id = parseTaskId(this.options.dialect, this.options.seed, rawId);
    return id === undefined ? undefined : this.tasks.get(id);
  }

  private createTask(body: Readonly<Record<string, unknown>>, now: number, reply: JsonReply, ip: string): SimResponse {
    const check = readTaskObject(this.options.dialect, body.task);
    if (!check.ok) {
      this.counters.parameterRejections++;
      return reply.error(check.code);
    }
    const admitted = this.admit(check.method, check.answerParams, check.signature, now, ip);
    if ('refusal' in admitted) return reply.error(admitted.refusal);
    const { task } = admitted;
    const taskId = formatTaskId(this.options.dialect, this.options.seed, task.id);
    if (!check.sync) return reply.ok({ taskId });
    // CapSolver answers a recognition task in this very response, once it is solved.
    return {
      ...reply.ok({ taskId, status: 'processing' }),
      holdUntil: task.readyAt,
      complete: () => {
        const at = this.clock();
        this.settle(at);
        return this.taskResult(task, at, reply);
      },
      undelivered: () => {
        if (task.readyAt > task.acceptedAt + task.workMs) this.cutInOutages.add(task.id);
      },
    };
  }

  /** getTaskResult's answer for a task: processing, ready with its solution (and cost), or its error. */
  private taskResult(task: SimTask, now: number, reply: JsonReply): SimResponse {
    const { dialect, seed } = this.options;
    const answer = this.readAnswer(task, now);
    const idField = dialect === 'capsolver' ? { taskId: formatTaskId(dialect, seed, task.id) } : {};
    if (answer === 'CAPCHA_NOT_READY') return reply.ok({ ...idField, status: 'processing' });
    if (answer === 'ERROR_CAPTCHA_UNSOLVABLE') return reply.error(answer);
    const solution = solutionOf(dialect, task.method, answer.value);
    if (dialect === 'capsolver') return reply.ok({ ...idField, status: 'ready', solution });
    return reply.ok({
      status: 'ready',
      solution,
      cost: toUsd(task.priceMicros).toFixed(6),
      ip: task.ip,
      createTime: Math.floor(task.acceptedAt / 1000),
      endTime: Math.floor(task.readyAt / 1000),
      solveCount: 1,
    });
  }

  /** A JSON API report: the dialect's method for it, then the same rules as res.php's. */
  private reportJson(
    name: string,
    body: Readonly<Record<string, unknown>>,
    now: number,
    reply: JsonReply,
  ): SimResponse {
    const { dialect } = this.options;
    const route = reportRoute(dialect, name, body);
    if (route === undefined) return reply.error('ERROR_NO_SUCH_METHOD');
    const unknown = unknownTaskCode(dialect);
    const task = this.jsonTask(body.taskId);
    // Anti-Captcha takes each report method for its own kind of task only.
    if (task === undefined || (route.methods !== undefined && !route.methods.includes(task.method))) {
      this.counters.reportsRefused++;
      return reply.error(unknown);
    }
    const refusal = this.record(task, route.verdict, now, {
      // 2captcha's JSON API says a late report (or an account over 40 % complaints) is not recorded.
      tooLate: dialect === '2captcha' ? 'ERROR_REPORT_NOT_RECORDED' : unknown,
      notSolved: unknown,
      duplicate: dialect === '2captcha' ? 'ERROR_DUPLICATE_REPORT' : unknown,
    });
    if (refusal !== undefined) return reply.error(refusal);
    return reply.ok(dialect === 'capsolver' ? { message: 'feedback received' } : { status: 'success' });
  }

  /** `ids=1,2,3`: one answer per id, joined with `|`, in the order asked. */
  private getMany(rawIds: string, now: number, reply: Reply): SimResponse {
    const ids = rawIds
      .split(',')
      .map((id) => id.trim())
      .filter((id) => id !== '');
    if (ids.length === 0) return reply.error('ERROR_WRONG_CAPTCHA_ID');
    if (ids.length > this.options.maxIdsPerRequest) return reply.error('ERROR_BAD_PARAMETERS');
    const parts = ids.map((id) => {
      const lookup = this.lookup(id);
      if (typeof lookup === 'string') return lookup;
      const answer = this.readAnswer(lookup, now);
      if (typeof answer === 'string') return answer;
      return typeof answer.value === 'string' ? answer.value : JSON.stringify(answer.value);
    });
    return reply.text(parts.join('|'));
  }

  private lookup(rawId: string | undefined): SimTask | string {
    if (rawId === undefined || rawId.trim() === '') return 'ERROR_WRONG_CAPTCHA_ID';
    if (!/^\d+$/.test(rawId.trim())) return 'ERROR_WRONG_ID_FORMAT';
    return this.tasks.get(Number(rawId.trim())) ?? 'ERROR_WRONG_CAPTCHA_ID';
  }

  private readAnswer(
    task: SimTask,
    now: number,
  ): 'CAPCHA_NOT_READY' | 'ERROR_CAPTCHA_UNSOLVABLE' | { value: SimAnswer } {
    if (task.polls === 0) this.counters.tasksPolled++;
    task.polls++;
    this.counters.idLookups++;
    if (task.state === 'solving') {
      this.counters.notReadyAnswers++;
      return 'CAPCHA_NOT_READY';
    }
    if (task.state === 'unsolvable') return 'ERROR_CAPTCHA_UNSOLVABLE';
    if (task.answerReads === 0) {
      const waited = now - task.readyAt;
      this.counters.answersDelivered++;
      this.counters.answerWaitTotalMs += waited;
      this.counters.answerWaitMaxMs = Math.max(this.counters.answerWaitMaxMs, waited);
    }
    task.answerReads++;
    this.counters.answerReads++;
    return { value: answerFor(this.options.seed, task.id, task.method, task.params) };
  }

  private report(rawId: string | undefined, verdict: 'bad' | 'good', now: number, reply: Reply): SimResponse {
    const lookup = this.lookup(rawId);
    if (typeof lookup === 'string') {
      this.counters.reportsRefused++;
      return reply.error(lookup);
    }
    const refusal = this.record(lookup, verdict, now, {
      tooLate: 'ERROR_WRONG_CAPTCHA_ID',
      notSolved: 'REPORT_NOT_RECORDED',
      duplicate: 'ERROR_DUPLICATE_REPORT',
    });
    return refusal === undefined ? reply.text('OK_REPORT_RECORDED') : reply.error(refusal);
  }

  /**
   * Record a report on a task (both protocols), or name why not: past the report window, not
   * solved, reported before. A bad report on a solved task refunds its price (`refundBadReports`).
   */
  private record(
    task: SimTask,
    verdict: 'bad' | 'good',
    now: number,
    codes: { tooLate: string; notSolved: string; duplicate: string },
  ): string | undefined {
    const windowMs = this.options.reportWindowMs ?? DEFAULT_REPORT_WINDOW_MS[this.options.dialect];
    let refusal: string | undefined;
    if (windowMs !== undefined && task.state !== 'solving' && now - task.readyAt > windowMs) refusal = codes.tooLate;
    else if (task.state !== 'solved') refusal = codes.notSolved;
    else if (task.reported !== undefined) refusal = codes.duplicate;
    if (refusal !== undefined) {
      this.counters.reportsRefused++;
      return refusal;
    }
    task.reported = verdict;
    if (verdict === 'good') {
      this.counters.reportGood++;
      return undefined;
    }
    this.counters.reportBad++;
    if (this.options.refundBadReports) {
      this.balanceMicros += task.priceMicros;
      this.counters.refunds++;
      this.counters.refundedMicros += task.priceMicros;
    }
    return undefined;
  }

  /** Finish every task whose time has come, oldest first: free its thread, charge, count. */
  private settle(now: number): void {
    this.forget(now);
    if (!this.pending.some((task) => task.readyAt <= now)) return;
    const due = this.pending.filter((task) => task.readyAt <= now).sort((a, b) => a.readyAt - b.readyAt || a.id - b.id);
    this.pending = this.pending.filter((task) => task.readyAt > now);
    for (const task of due) {
      this.finished.push(task);
      if (task.willFail) {
        task.state = 'unsolvable';
        this.counters.unsolvable++;
        continue;
      }
      task.state = 'solved';
      // The price was set aside at acceptance; only an operator's drain (update) can leave less.
      const charge = Math.min(task.priceMicros, Math.max(0, this.balanceMicros));
      this.balanceMicros -= charge;
      this.counters.spentMicros += charge;
      this.counters.solved++;
      if (this.solvedSignatures.has(task.signature)) this.counters.duplicateSolves++;
      else this.solvedSignatures.add(task.signature);
    }
  }

  /** Whether `now` falls inside an outage window. */
  private inOutage(now: number): boolean {
    const sinceStart = now - this.startedAt;
    return this.options.outages.some(
      (window) => sinceStart >= window.startMs && sinceStart < window.startMs + window.durationMs,
    );
  }

  /** When a task accepted at `acceptedAt` that needs `workMs` of service time is done. */
  private readyAtFor(acceptedAt: number, workMs: number): number {
    return finishSkippingOutages(acceptedAt, workMs, this.startedAt, this.options.outages);
  }

  /** Drop finished tasks older than `forgetAfterMs`; their ids become unknown. */
  private forget(now: number): void {
    const horizon = now - this.options.forgetAfterMs;
    for (let oldest = this.finished[this.finishedHead]; oldest !== undefined && oldest.readyAt < horizon; ) {
      this.tasks.delete(oldest.id);
      this.finishedHead++;
      oldest = this.finished[this.finishedHead];
    }
    // Compact now and then instead of shifting the array on every removal.
    if (this.finishedHead > 1024 && this.finishedHead * 2 > this.finished.length) {
      this.finished = this.finished.slice(this.finishedHead);
      this.finishedHead = 0;
    }
  }

  private notePeak(): void {
    this.counters.peakThreads = Math.max(this.counters.peakThreads, this.pending.length);
    this.counters.peakThreadsTotal = Math.max(
      this.counters.peakThreadsTotal,
      this.pending.length + this.options.foreignThreads,
    );
  }

  private noteBadKey(ip: string, now: number): void {
    const limit = this.options.banAfterBadKeyRequests;
    if (limit === undefined) return;
    const count = (this.badKeyRequestsByIp.get(ip) ?? 0) + 1;
    this.badKeyRequestsByIp.set(ip, count);
    if (count >= limit) {
      this.bannedUntilByIp.set(ip, now + this.options.ipBanMs);
      this.badKeyRequestsByIp.delete(ip);
    }
  }

  private reseed(): void {
    const seed = this.options.seed;
    this.random = {
      latency: stream(seed, 'latency'),
      unsolvable: stream(seed, 'unsolvable'),
      transient: stream(seed, 'transient'),
      ids: stream(seed, 'ids'),
    };
    // Eleven-digit ids like the real services', different per seed, never reused after a reseed.
    const base = 70_000_000_000 + Math.floor(this.random.ids() * 9_000_000_000);
    this.nextId = Math.max(this.nextId, base);
  }
}

function emptyCounters(balanceStartMicros: number, threadsInUse: number) {
  return {
    submissions: 0,
    accepted: 0,
    solved: 0,
    unsolvable: 0,
    overCapRejections: 0,
    noFundsRejections: 0,
    parameterRejections: 0,
    keyRejections: 0,
    transientErrors: 0,
    outageAnswers: 0,
    peakThreads: threadsInUse,
    peakThreadsTotal: 0,
    balanceStartMicros,
    spentMicros: 0,
    resultRequests: 0,
    notReadyAnswers: 0,
    answersDelivered: 0,
    answerWaitTotalMs: 0,
    answerWaitMaxMs: 0,
    answerReads: 0,
    idLookups: 0,
    tasksPolled: 0,
    duplicateSolves: 0,
    reportBad: 0,
    reportGood: 0,
    refunds: 0,
    refundedMicros: 0,
    reportsRefused: 0,
    jsonApiRequests: 0,
    errorsByCode: {} as Record<string, number>,
  };
}

/**
 * The instant `workMs` of service time has passed since `from`, the outage windows (ms after
 * `startedAt`) not counting: work stops when a window opens and resumes when it closes.
 */
function finishSkippingOutages(
  from: number,
  workMs: number,
  startedAt: number,
  outages: readonly OutageWindow[],
): number {
  const windows = outages
    .map((window) => ({ start: startedAt + window.startMs, end: startedAt + window.startMs + window.durationMs }))
    .sort((a, b) => a.start - b.start);
  let at = from;
  let remaining = workMs;
  for (const window of windows) {
    if (window.end <= at) continue;
    if (window.start > at) {
      if (at + remaining <= window.start) return at + remaining;
      remaining -= window.start - at;
    }
    at = window.end;
  }
  return at + remaining;
}

/** Balance as the services print it: a plain decimal number. */
function formatUsd(micros: number): string {
  return String(Number(toUsd(micros).toFixed(6)));
}

/** Writes answers in the mode the request asked for and counts error codes. */
class Reply {
  constructor(
    private readonly json: boolean,
    private readonly idType: 'number' | 'string',
    private readonly errorsByCode: Record<string, number>,
  ) {}

  ok(id: number): SimResponse {
    return this.json
      ? this.jsonBody({ status: 1, request: this.idType === 'number' ? id : String(id) })
      : this.plain(`OK|${id}`);
  }

  answer(value: SimAnswer, extended: Readonly<Record<string, string>> = {}): SimResponse {
    if (this.json) return this.jsonBody({ status: 1, request: value, ...extended });
    return this.plain(`OK|${typeof value === 'string' ? value : JSON.stringify(value)}`);
  }

  /** A status-1 answer whose plain form has no `OK|` (balance, reports, `ids`). */
  text(value: string): SimResponse {
    return this.json ? this.jsonBody({ status: 1, request: value }) : this.plain(value);
  }

  notReady(): SimResponse {
    return this.json ? this.jsonBody({ status: 0, request: 'CAPCHA_NOT_READY' }) : this.plain('CAPCHA_NOT_READY');
  }

  error(code: string): SimResponse {
    this.count(code);
    return this.json
      ? this.jsonBody({ status: 0, request: code, error_text: ERROR_TEXT[code] ?? code })
      : this.plain(code);
  }

  /** The service is down (an outage window): what a load balancer answers for it. */
  unavailable(): SimResponse {
    this.count('HTTP_503');
    return { status: 503, contentType: 'text/plain; charset=utf-8', body: 'Service Unavailable' };
  }

  transient(kind: TransientKind): SimResponse {
    switch (kind) {
      case 'error_code':
        return this.error('ERROR_SERVER_ERROR');
      case 'http_500':
        this.count('HTTP_500');
        return { status: 500, contentType: 'text/plain; charset=utf-8', body: 'Internal Server Error' };
      case 'html':
        this.count('HTML_PAGE');
        return { status: 200, contentType: 'text/html; charset=utf-8', body: HTML_PAGE };
    }
  }

  private count(code: string): void {
    this.errorsByCode[code] = (this.errorsByCode[code] ?? 0) + 1;
  }

  private jsonBody(value: unknown): SimResponse {
    return { status: 200, contentType: 'application/json', body: JSON.stringify(value) };
  }

  private plain(text: string): SimResponse {
    return { status: 200, contentType: 'text/plain; charset=utf-8', body: text };
  }
}
