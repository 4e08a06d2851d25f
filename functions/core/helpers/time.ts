/** Time helpers shared by the handlers' loops, the local runtime, the lab and the benchmarks. */
import { setTimeout as delay } from 'node:timers/promises';

/** Resolve after `ms` (rejects with the signal's reason when it aborts first). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return delay(ms, undefined, signal === undefined ? undefined : { signal });
}

/** A duration for people: `840 ms` under ten seconds' worth of ms, else `12.3 s`. */
export function formatMs(ms: number): string {
  return ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

/** Seconds with one decimal: `12.3 s`. */
export function formatSeconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
