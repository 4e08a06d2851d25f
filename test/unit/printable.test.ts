import { describe, expect, it } from 'vitest';
import { printable } from '../../functions/core/helpers/printable.js';

describe('printable', () => {
  it('writes control characters, separators and lone surrogates out, and keeps the rest', () => {
    expect(printable('a\u001b[31mb\r\n\u0000\u007f\u0085\u2028c')).toBe(
      'a\\u001b[31mb\\u000d\\u000a\\u0000\\u007f\\u0085\\u2028c',
    );
    expect(printable('x\ud83dy\ude00')).toBe('x\\ud83dy\\ude00');
    expect(printable('ok 😀 é — 漢字')).toBe('ok 😀 é — 漢字');
  });

  it('writes out the invisible format characters that reorder or hide text (bidi overrides, zero-width, BOM)', () => {
    // Before, a reason holding U+202E read backwards in redrive's listing.
    expect(printable('user\u202Erecaptcha\u2066x\u200B\uFEFF\u061C\u2060')).toBe(
      'user\\u202erecaptcha\\u2066x\\u200b\\ufeff\\u061c\\u2060',
    );
  });

  it('cuts at a character, never inside a surrogate pair, and says it cut', () => {
    expect(printable(`${'a'.repeat(3)}😀b`, 4)).toBe('aaa😀…');
    expect(printable('abcd', 4)).toBe('abcd');
    expect(printable('\u0001\u0002', 1)).toBe('\\u0001…');
  });
});
