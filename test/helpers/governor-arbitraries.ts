/** fast-check arbitraries shared by the governor's property tests: any lane, any signal possibly missing. */
import fc from 'fast-check';

/** The value, or undefined (a signal that could not be read). */
export const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });

/** Any lane a tick may report. */
export const laneArb = fc.record({
  backlog: maybe(fc.nat(5000)),
  inFlight: maybe(fc.nat(1000)),
  delayed: maybe(fc.nat(100)),
  oldestAgeSeconds: maybe(fc.nat(10_000)),
  arrivalRate: maybe(fc.double({ min: 0, max: 100, noNaN: true })),
  ceiling: fc.integer({ min: 2, max: 1000 }),
  enabled: fc.boolean(),
});
