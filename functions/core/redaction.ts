/**
 * Finding a secret (a solver key) in text before it is logged, saved or published. A key is
 * found in any letter case and reversed: a service or proxy that echoes the request can return
 * it upper-cased (`ERROR_0123ABCD…`) or backwards, and a plain substring test misses both. It is
 * found in the forms a request carries it in too: URL-encoded (a query, a form body) and
 * JSON-escaped (a createTask body echoed in an error page); a key holding `+`, `/`, `"` or `\`
 * was missed in those forms. Pure: no I/O.
 */
/** What a found secret is replaced with. */
export const REDACTED = '***';

/** Secrets shorter than this are not searched for: they would match ordinary text. */
const MIN_SECRET_LENGTH = 4;

const patterns = new Map<string, RegExp>();

function escaped(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The forms a request carries `text` in: as is, URL-encoded (both ways), JSON-escaped. */
function carriedForms(text: string): string[] {
  return [
    text,
    encodeURIComponent(text),
    new URLSearchParams({ k: text }).toString().slice(2),
    JSON.stringify(text).slice(1, -1),
  ];
}

/** One pattern per secret: the secret or its reverse, as is or in a form a request carries it in, any case. */
function patternOf(secret: string): RegExp {
  let pattern = patterns.get(secret);
  if (pattern === undefined) {
    const reversed = [...secret].reverse().join('');
    const forms = [...new Set([...carriedForms(secret), ...carriedForms(reversed)])];
    // The longest first: a form that holds another (the encoded one holds a plain prefix) is taken whole.
    forms.sort((a, b) => b.length - a.length);
    pattern = new RegExp(forms.map(escaped).join('|'), 'gi');
    // A handful of keys per process: the cache stays tiny.
    if (patterns.size < 64) patterns.set(secret, pattern);
  }
  pattern.lastIndex = 0;
  return pattern;
}

function searchable(secret: string | undefined): secret is string {
  return secret !== undefined && secret.length >= MIN_SECRET_LENGTH;
}

/** `text` with every occurrence of each secret (any case, or reversed) replaced by `***`. */
export function redactSecrets(text: string, secrets: Iterable<string | undefined>): string {
  let out = text;
  for (const secret of secrets) if (searchable(secret)) out = out.replace(patternOf(secret), REDACTED);
  return out;
}

/** True when `text` holds one of the secrets in any case, or reversed. */
export function containsSecret(text: string, secrets: Iterable<string | undefined>): boolean {
  for (const secret of secrets) if (searchable(secret) && patternOf(secret).test(text)) return true;
  return false;
}

/**
 * The secrets one process holds, learned as they are loaded, and a redaction with all of them.
 * The consumer learns its keys when its wiring reads them; until then only the query form
 * (`key=…`) is masked.
 */
export interface Redactor {
  /** Remember a secret (a key just read). */
  add(secret: string): void;
  /** `text` without any known secret, and without the value of a `key=` query parameter. */
  redact(text: string): string;
  /** A JSON-serialisable value with every string in it redacted (log attributes, records). */
  redactValue<T>(value: T): T;
}

/**
 * The places a request names the key in, masked whether or not the key is known yet: a query or
 * form parameter (`?key=…`, `&key=…`, a form body that begins with `key=…`) and createTask's
 * `"clientKey":"…"` (a body echoed in an error page).
 */
const KEY_PARAMETER = /((?:^|[?&\s])key=)[^&\s"']+/gi;
const CLIENT_KEY_MEMBER = /("clientKey"\s*:\s*")(?:[^"\\]|\\.)*/g;

/** `text` with the key parameters' values masked (see `KEY_PARAMETER`, `CLIENT_KEY_MEMBER`). */
export function maskKeyParameters(text: string): string {
  return text.replace(KEY_PARAMETER, `$1${REDACTED}`).replace(CLIENT_KEY_MEMBER, `$1${REDACTED}`);
}

/**
 * A JSON-serialisable value (log attributes, a record) with every string in it, member names
 * included, passed through `redact`; the value itself when nothing changed. Each string is
 * redacted as itself, not inside the value's JSON text, where a key holding `"` or `\` is
 * escaped and a replacement could cut an escape in two.
 */
export function redactJson<T>(value: T, redact: (text: string) => string): T {
  if (value === undefined || value === null) return value;
  const text = JSON.stringify(value);
  if (text === undefined) return value;
  let changed = false;
  const walk = (item: unknown): unknown => {
    if (typeof item === 'string') {
      const clean = redact(item);
      if (clean !== item) changed = true;
      return clean;
    }
    if (Array.isArray(item)) return item.map(walk);
    if (item !== null && typeof item === 'object')
      return Object.fromEntries(Object.entries(item).map(([name, member]) => [walk(name), walk(member)]));
    return item;
  };
  const clean = walk(JSON.parse(text));
  return changed ? (clean as T) : value;
}

/** A redactor that knows `initial` and whatever is added later. */
export function createRedactor(initial: Iterable<string> = []): Redactor {
  const secrets = new Set<string>();
  for (const secret of initial) if (searchable(secret)) secrets.add(secret);
  const redact = (text: string): string => redactSecrets(maskKeyParameters(text), secrets);
  return {
    add(secret) {
      if (searchable(secret)) secrets.add(secret);
    },
    redact,
    redactValue: <T>(value: T): T => redactJson(value, redact),
  };
}
