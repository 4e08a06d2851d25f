/**
 * Finding a secret (a solver key) in text before it is logged, saved or published. A key is
 * found in any letter case and reversed: a service or proxy that echoes the request can return
 * it upper-cased (`ERROR_0123ABCD…`) or backwards, and a plain substring test misses both.
 * Pure: no I/O.
 */

/** What a found secret is replaced with. */
export const REDACTED = '***';

/** Secrets shorter than this are not searched for: they would match ordinary text. */
const MIN_SECRET_LENGTH = 4;

const patterns = new Map<string, RegExp>();

function escaped(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** One pattern per secret: the secret or its reverse, any case. */
function patternOf(secret: string): RegExp {
  let pattern = patterns.get(secret);
  if (pattern === undefined) {
    const reversed = [...secret].reverse().join('');
    pattern = new RegExp(`${escaped(secret)}|${escaped(reversed)}`, 'gi');
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

/** The query form a URL in an error message carries the key in. */
const KEY_PARAMETER = /([?&]key=)[^&\s"']+/gi;

/** A redactor that knows `initial` and whatever is added later. */
export function createRedactor(initial: Iterable<string> = []): Redactor {
  const secrets = new Set<string>();
  for (const secret of initial) if (searchable(secret)) secrets.add(secret);
  const redact = (text: string): string => redactSecrets(text.replace(KEY_PARAMETER, `$1${REDACTED}`), secrets);
  return {
    add(secret) {
      if (searchable(secret)) secrets.add(secret);
    },
    redact,
    redactValue<T>(value: T): T {
      if (value === undefined || value === null) return value;
      const text = JSON.stringify(value);
      if (text === undefined) return value;
      const clean = redact(text);
      return clean === text ? value : (JSON.parse(clean) as T);
    },
  };
}
