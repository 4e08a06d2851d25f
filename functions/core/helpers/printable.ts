/**
 * The characters text from outside must not carry into a record, a log, a header or a terminal:
 * control characters (C0, DEL, C1), the line and paragraph separators, and the invisible format
 * characters that reorder or hide what a reader sees (bidi embeddings, overrides and isolates,
 * zero-width spaces and joiners, the word joiner, the Arabic letter mark, the byte order mark):
 * a reason holding U+202E read backwards in `redrive --dry-run`'s listing.
 */
export const CONTROL_OR_FORMAT =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is this pattern's purpose.
  /[\u0000-\u001F\u007F-\u009F\u061C\u200B-\u200F\u2028-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/;

/** Whether the UTF-16 code unit `c` is one of {@link CONTROL_OR_FORMAT}. */
export function isControlOrFormat(c: number): boolean {
  return CONTROL_OR_FORMAT.test(String.fromCharCode(c));
}

/**
 * Text from outside (a producer's message, a parser's error about it) made fit for a reason, a
 * record, a message attribute or a terminal: at most `max` characters, never cutting a surrogate
 * pair in two, with control and format characters ({@link CONTROL_OR_FORMAT}) and lone
 * surrogates written as `\uXXXX`. SQS refuses such characters in a message attribute (the DLQ
 * letter's `reasonDetail` then failed to send, and its message went round as a store outage), a
 * CR LF forged a row of `redrive --dry-run`'s listing, and an escape sequence reached a terminal.
 */
export function printable(text: string, max = 1024): string {
  let out = '';
  let length = 0;
  let i = 0;
  for (; i < text.length && length < max; i += 1) {
    const c = text.charCodeAt(i);
    const pair = c >= 0xd800 && c <= 0xdbff && isLowSurrogate(text.charCodeAt(i + 1));
    if (pair) {
      out += text.slice(i, i + 2);
      i += 1;
    } else if (unprintable(c)) out += `\\u${c.toString(16).padStart(4, '0')}`;
    else out += text[i];
    length += 1;
  }
  return i < text.length ? `${out}…` : out;
}

function unprintable(c: number): boolean {
  return isControlOrFormat(c) || (c >= 0xd800 && c <= 0xdfff);
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/**
 * A failed call in a few words, fit for a terminal: the socket's code (ECONNREFUSED) or the
 * error's name, then its message when it says more, printable and cut at `max` (AWS's and the
 * network's words: never a key).
 */
export function failureText(error: unknown, max = 200): string {
  const e = error as { name?: string; message?: string; code?: string };
  const name = e.code ?? e.name ?? 'Error';
  return printable(`${name}${e.message && e.message !== name ? `: ${e.message}` : ''}`, max);
}
