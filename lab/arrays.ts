/**
 * Checked element access for the lab's arrays. The tsconfig's `noUncheckedIndexedAccess` types
 * every `array[i]` as possibly undefined; the simulator's indices come from its own counters, so
 * an index out of range is a bug in the lab, never data, and it throws rather than reads as 0.
 */

/** The element at `index`. @throws RangeError when `index` is outside the array. */
export function at<T>(array: ArrayLike<T>, index: number): T {
  const value = array[index];
  if (value === undefined) throw new RangeError(`index ${index} outside 0..${array.length - 1}`);
  return value;
}

/** Adds `by` (default 1) to the number at `index` and returns the new value. */
export function bump(array: { [index: number]: number; readonly length: number }, index: number, by = 1): number {
  const value = at(array, index) + by;
  array[index] = value;
  return value;
}
