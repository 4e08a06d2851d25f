/**
 * The generator's trace classes (lab/generate.ts draws them; a failing trace's file names its
 * class, lab/trace.ts checks it). Their own module: the trace format and the generator import
 * each other's parts otherwise.
 */
export const TRACE_CLASS_NAMES = [
  'idle',
  'load-steps',
  'load-ramps',
  'heavy-tails',
  'neighbours',
  'neighbour-takes-all',
  'outages',
  'blips-tiny',
  'blips-huge',
  'blips-any',
  'slowdown',
  'money-out',
  'money-top-ups',
  'combined',
] as const;
