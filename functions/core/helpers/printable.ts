/**
 * Text from outside (a producer's message, a parser's error about it) made fit for a reason, a
 * record, a message attribute or a terminal: at most `max` characters, never cutting a surrogate
 * pair in two, with control characters (C0, DEL, C1), line and paragraph separators and lone
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
  return c < 0x20 || (c >= 0x7f && c <= 0x9f) || c === 0x2028 || c === 0x2029 || (c >= 0xd800 && c <= 0xdfff);
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
