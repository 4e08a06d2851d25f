/**
 * HTTP face of the simulator: reads in.php / res.php requests in every shape clients send
 * (GET query, urlencoded POST, JSON POST, multipart with a `file` part) and the JSON task API's
 * POSTs (`/createTask`, `/getTaskResult`, `/getBalance`, the report methods) on the same port,
 * hands them to the model and writes its answer. GET /stats returns the counters as JSON.
 *
 * A request in absolute form (`POST https://api.anti-captcha.com/createTask`, what an HTTP
 * client sends to a proxy) is read by its path, so clients whose URL is built in can reach the
 * simulator through their HTTP library's proxy setting.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { SolverSimModel, SimRequest } from './model.js';
import type { UploadedFile } from './submission.js';

/** Largest request body read, bytes: a 100 kB image in base64 inside multipart fits easily. */
export const MAX_BODY_BYTES = 1024 * 1024;

/** Longest a synchronous answer (CapSolver's image tasks) is held before it is written, ms. */
const MAX_HOLD_MS = 120_000;

/** A JSON task API method name: the last path segment of a POST, camelCase (createTask, getBalance, …). */
const JSON_METHOD = /^[a-z][A-Za-z]{2,40}$/;

/** A request body that could not be read as its content type says. */
class BodyError extends Error {
  override readonly name = 'BodyError';
  constructor(
    readonly code: string,
    options?: { cause?: unknown },
  ) {
    super(`request body rejected: ${code}`, options);
  }
}

/** Build (not start) the HTTP server around a model. */
export function createSimServer(model: SolverSimModel): Server {
  const server = createServer((req, res) => {
    serve(model, req, res).catch((error: unknown) => {
      // Only a bug in the simulator lands here; answer like a failing service would.
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(`simulator error: ${error instanceof Error ? error.name : 'unknown'}`);
    });
  });
  // Clients poll with keep-alive; do not let idle sockets hold `close()` open.
  server.keepAliveTimeout = 5_000;
  return server;
}

/** Start listening; resolves with the base URL (in.php lives at `${url}/in.php`). */
export async function listen(server: Server, port: number, host: string): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${shownHost}:${address.port}`;
}

async function serve(model: SolverSimModel, req: IncomingMessage, res: ServerResponse): Promise<void> {
  let url: URL;
  try {
    url = new URL(req.url ?? '/', 'http://solver-sim.local');
  } catch {
    // A request target no URL reads (`http://[zz/in.php`): answered HTTP 500 before.
    req.resume();
    return send(res, 400, 'text/plain; charset=utf-8', 'Bad Request');
  }
  const path = url.pathname.replace(/\/+$/, '');
  const last = path.slice(path.lastIndexOf('/') + 1);
  if (req.method === 'POST' && JSON_METHOD.test(last) && last !== 'stats') return serveJson(model, req, res, last);
  const endpoint = path.endsWith('/in.php') ? 'in' : path.endsWith('/res.php') ? 'res' : undefined;

  if (endpoint === undefined) {
    if (path === '/stats' && req.method === 'GET')
      return send(res, 200, 'application/json', JSON.stringify(model.stats()));
    if (path === '' || path === '/health')
      return send(
        res,
        200,
        'text/plain; charset=utf-8',
        'solver-sim: in.php, res.php; POST createTask, getTaskResult, getBalance, report methods; GET /stats\n',
      );
    req.resume();
    return send(res, 404, 'text/plain; charset=utf-8', 'Not Found');
  }

  const fields: Record<string, string> = Object.fromEntries(url.searchParams);
  const request: SimRequest = { endpoint, fields, ip: req.socket.remoteAddress ?? 'unknown' };
  if (req.method === 'POST' || req.method === 'PUT') {
    try {
      const body = await parseBody(req);
      Object.assign(fields, body.fields);
      if (body.file) request.file = body.file;
    } catch (error) {
      request.parseError = error instanceof BodyError ? error.code : 'ERROR_BAD_PARAMETERS';
    }
  } else {
    req.resume();
  }
  const answer = model.handle(request);
  const headers: Record<string, string> = { 'content-type': answer.contentType };
  // header_acao=1 asks for a CORS header so browser clients can read the answer.
  if (fields.header_acao === '1') headers['access-control-allow-origin'] = '*';
  res.writeHead(answer.status, headers);
  res.end(answer.body);
}

/** One JSON task API request: the body read as JSON whatever its content type (clients differ). */
async function serveJson(model: SolverSimModel, req: IncomingMessage, res: ServerResponse, jsonMethod: string) {
  let body: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse((await readBody(req)).toString('utf8'));
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed))
      body = parsed as Record<string, unknown>;
  } catch {
    // Not JSON (or too big): an empty body, which the model refuses as the service would (no key).
  }
  let answer = model.handle({
    endpoint: 'json',
    jsonMethod,
    body,
    fields: {},
    ip: req.socket.remoteAddress ?? 'unknown',
  });
  if (answer.holdUntil !== undefined && answer.complete !== undefined) {
    // Until the task is ready by the model's clock (Date.now): one timer can end a millisecond
    // early by it (it counts from the event loop's cached time), and the answer would then be
    // "processing" where CapSolver answers with the solution. The rest is waited again.
    const until = Math.min(answer.holdUntil, Date.now() + MAX_HOLD_MS);
    for (let left = until - Date.now(); left > 0; left = until - Date.now()) await sleep(left);
    // A client that gave up on the held answer closed its request: the answer, its id in it, never reaches it.
    if (req.socket.destroyed) return answer.undelivered?.();
    answer = answer.complete();
  }
  send(res, answer.status, answer.contentType, answer.body);
}

function send(res: ServerResponse, status: number, contentType: string, body: string): void {
  res.writeHead(status, { 'content-type': contentType });
  res.end(body);
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  let tooBig = false;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    // Keep draining so the client gets an answer instead of a reset connection.
    if (size > MAX_BODY_BYTES) tooBig = true;
    else chunks.push(chunk);
  }
  if (tooBig) throw new BodyError('ERROR_TOO_BIG_CAPTCHA_FILESIZE');
  return Buffer.concat(chunks);
}

async function parseBody(req: IncomingMessage): Promise<{ fields: Record<string, string>; file?: UploadedFile }> {
  const raw = await readBody(req);
  const contentType = (req.headers['content-type'] ?? '').toLowerCase();
  if (raw.length === 0) return { fields: {} };
  if (contentType.startsWith('application/json')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw.toString('utf8'));
    } catch (cause) {
      throw new BodyError('ERROR_BAD_PARAMETERS', { cause });
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
      throw new BodyError('ERROR_BAD_PARAMETERS');
    const fields: Record<string, string> = {};
    for (const [name, value] of Object.entries(parsed)) {
      if (value === null || value === undefined) continue;
      fields[name] = typeof value === 'object' ? JSON.stringify(value) : String(value);
    }
    return { fields };
  }
  if (contentType.startsWith('multipart/form-data')) {
    // undici's (Node's own fetch) multipart parser: no hand-written boundary handling.
    let form: FormData;
    try {
      form = await new Request('http://solver-sim.local/', {
        method: 'POST',
        headers: { 'content-type': contentType },
        body: raw,
      }).formData();
    } catch (cause) {
      throw new BodyError('ERROR_UPLOAD', { cause });
    }
    const fields: Record<string, string> = {};
    let file: UploadedFile | undefined;
    for (const [name, value] of form) {
      if (typeof value === 'string') {
        fields[name] = value;
        continue;
      }
      const bytes = Buffer.from(await value.arrayBuffer());
      if (name === 'file') file = { filename: value.name ?? '', bytes };
      // Other file parts (e.g. imginstructions) travel as base64 text, as the API takes them.
      else fields[name] = bytes.toString('base64');
    }
    return file ? { fields, file } : { fields };
  }
  // application/x-www-form-urlencoded, and what clients send without a content type.
  return { fields: Object.fromEntries(new URLSearchParams(raw.toString('utf8'))) };
}
