/**
 * Checked element access for the lab's arrays. The tsconfig's `noUncheckedIndexedAccess` types
 * every `array[i]` as possibly undefined; the simulator's indices come from its own counters, so
 * an index out of range is a bug in the lab, never data, and it throws rather than reads as 0.
 *
 * One function per typed-array kind, on purpose: V8 keeps one inline cache per function, and a
 * single generic accessor fed five array kinds goes megamorphic and halves the simulator's speed
 * (a simulated day of 10⁶ tasks reads these arrays tens of millions of times).
 */

function outOfRange(index: number, length: number): RangeError {
  return new RangeError(`index ${index} outside 0..${length - 1}`);
}

/** The element at `index` of a plain array. @throws RangeError when `index` is outside it. */
export function at<T>(array: readonly T[], index: number): T {
  const value = array[index];
  if (value === undefined) throw outOfRange(index, array.length);
  return value;
}

/** The number at `index` of a Float64Array. @throws RangeError when `index` is outside it. */
export function f64(array: Float64Array, index: number): number {
  const value = array[index];
  if (value === undefined) throw outOfRange(index, array.length);
  return value;
}

/** The number at `index` of a Uint8Array. @throws RangeError when `index` is outside it. */
export function u8(array: Uint8Array, index: number): number {
  const value = array[index];
  if (value === undefined) throw outOfRange(index, array.length);
  return value;
}

/** The number at `index` of a Uint16Array. @throws RangeError when `index` is outside it. */
export function u16(array: Uint16Array, index: number): number {
  const value = array[index];
  if (value === undefined) throw outOfRange(index, array.length);
  return value;
}

/** The number at `index` of an Int32Array. @throws RangeError when `index` is outside it. */
export function i32(array: Int32Array, index: number): number {
  const value = array[index];
  if (value === undefined) throw outOfRange(index, array.length);
  return value;
}

/** Adds `by` (default 1) to the count at `index` of a Float64Array; returns the new count. */
export function bumpF64(array: Float64Array, index: number, by = 1): number {
  const value = f64(array, index) + by;
  array[index] = value;
  return value;
}

/** Adds 1 to the count at `index` of a Uint8Array; returns the new count. */
export function bumpU8(array: Uint8Array, index: number): number {
  const value = u8(array, index) + 1;
  array[index] = value;
  return value;
}

/** Adds 1 to the count at `index` of a Uint16Array; returns the new count. */
export function bumpU16(array: Uint16Array, index: number): number {
  const value = u16(array, index) + 1;
  array[index] = value;
  return value;
}
