/**
 * The policies the lab compares, each on the same traffic: the governor (the real `decide()`),
 * the scalers of the usual scripts (thread pool, process pool, Kubernetes HPA), Lambda's own
 * scaling at a fixed maximum, a static pool, and a clairvoyant oracle as the floor.
 */
import { cloudWatchTiming, decideTick, governorConfigFrom, initialState } from '../functions/core/governor/policy.js';
import type { Decision, GovernorState } from '../functions/core/governor/types.js';
import type { FleetSettings } from '../functions/core/settings.js';
import { threadsOpened } from '../functions/core/thread-leases.js';
import { DEFAULT_MODEL, type ModelParams } from './model.js';
import type { ControlAction, Policy, PolicyView } from './sim.js';

export const POLICY_NAMES = [
  'governor',
  'thread-pool',
  'thread-pool-plan',
  'process-pool',
  'process-pool-plan',
  'hpa',
  'hpa-plan',
  'lambda-fixed',
  'static-pool',
  'oracle',
  'oracle-ramp',
  'oracle-park',
] as const;
export type PolicyName = (typeof POLICY_NAMES)[number];

/** One sentence per policy, for the report and docs/lab.md. */
export const POLICY_DESCRIPTIONS: Readonly<Record<PolicyName, string>> = {
  governor:
    "captcha-fleet's governor: the real decide() sets the mapping's maximum concurrency every 10 s from fresh queue attributes, the balance and minute-late metrics; Lambda's SQS scaling ramps under it. In the parked design (solveMode park, the default) the mapping takes the decision's submitters, its thread ceiling opens as thread leases, and the governor's watch records the answers.",
  'thread-pool':
    'The usual one-process script: every 10 s, +2 workers when more than 20 tasks wait and over 70 % are busy, −1 when under 5 wait and under 20 % are busy; 2..20 workers, no scale-up under $1.',
  'process-pool':
    'The usual multi-process script: every 15 s, add max(1, backlog ÷ 10) when the backlog exceeds 5 × workers, remove 2 when under 3 wait; 2..16 processes, 1 s to spawn.',
  'thread-pool-plan':
    'The thread-pool script with its maximum raised from 20 to the plan threads (less reserved), so its pool could use every thread the governor may.',
  'process-pool-plan': 'The process-pool script with its maximum raised from 16 to the plan threads (less reserved).',
  'hpa-plan': 'The HPA with maxReplicas raised from 20 to the plan threads (less reserved).',
  hpa: 'A Kubernetes HPA on queue length: target 10 per replica, 2..20 replicas, 15 s sync, default scale-up (max of +4 pods or +100 % per 15 s), 300 s scale-down stabilization, 10 s pod start.',
  'lambda-fixed':
    "Lambda's own SQS scaling with the mapping's maximum concurrency fixed at the plan's cap and no governor.",
  'static-pool': 'A pool of workers equal to the plan threads, always on.',
  'oracle-ramp':
    "The fair floor: a clairvoyant Lambda whose mapping's maximum concurrency is exactly the free threads at every instant, disabled exactly in outages and once its solves in flight would take the balance under the pause level, under Lambda's own SQS ramp, overheads, retries and hand-backs (a floor some Lambda policy could reach on a surge faster than the ramp).",
  'oracle-park':
    "The fair floor in the parked design (solveMode park): oracle-ramp's clairvoyant Lambda with its thread leases open to exactly the free threads at every instant (closed in outages and once its solves in flight would take the balance under the pause level), its short invocations under Lambda's own SQS ramp, the governor's watch recording the answers.",
  oracle:
    'Clairvoyant floor: exactly the free threads (plan − foreign) at every instant, started instantly, no overhead, billed only while busy; stops once its solves in flight would take the balance under the pause level, and while the solver is down.',
};

/** Builds a policy for a trace's settings. */
export function createPolicy(name: PolicyName, settings: FleetSettings, model: Partial<ModelParams> = {}): Policy {
  const m = { ...DEFAULT_MODEL, ...model };
  switch (name) {
    case 'governor':
      return governorPolicy(settings);
    case 'thread-pool':
      return threadPool(name, m, 20);
    case 'thread-pool-plan':
      return threadPool(name, m, settings.effectiveCap);
    case 'process-pool':
      return processPool(name, m, 16);
    case 'process-pool-plan':
      return processPool(name, m, settings.effectiveCap);
    case 'hpa':
      return hpa(name, m, 20);
    case 'hpa-plan':
      return hpa(name, m, settings.effectiveCap);
    case 'lambda-fixed':
      return { name, capacity: 'lambda', periodSeconds: undefined, initialTarget: (s) => s.maxConcurrency };
    case 'static-pool':
      return {
        name,
        capacity: 'pool',
        periodSeconds: undefined,
        workerStartSeconds: 0,
        initialTarget: (s) => s.effectiveCap,
      };
    case 'oracle':
      return { name, capacity: 'oracle', periodSeconds: undefined, initialTarget: (s) => s.planThreads };
    case 'oracle-ramp':
      return {
        name,
        capacity: 'lambda',
        clairvoyant: true,
        periodSeconds: undefined,
        initialTarget: (s) => Math.max(1, s.maxConcurrency),
      };
    case 'oracle-park':
      return {
        name,
        capacity: 'lambda',
        clairvoyant: true,
        parked: true,
        periodSeconds: undefined,
        initialTarget: (s) => Math.max(1, s.maxConcurrency),
      };
  }
}

/**
 * What a governor decision sets in the simulator: the waiting design's mapping ceiling, or in the
 * parked design (solveMode `park`) the mapping's submitters and the thread leases its ceilings
 * open (functions/governor/lease-step.ts, withLeaseLimits).
 */
export function governorAction(
  decision: Pick<Decision, 'ceilings' | 'enabled' | 'submitters'>,
  settings: FleetSettings,
): Pick<ControlAction, 'target' | 'leases'> {
  if (settings.solveMode !== 'park') return { target: decision.ceilings.normal };
  const lane = { planCap: settings.effectiveCap, tasksPerInvocation: settings.tasksPerInvocation };
  return {
    target: decision.submitters?.normal ?? decision.ceilings.normal,
    leases: { slots: threadsOpened(decision, lane), ceiling: decision.ceilings.normal },
  };
}

/**
 * The governor: its tick runs the real policy (decideTick) with the signals the simulator
 * measures; a decision that asks for a probe submission gets one (the simulator makes it as the
 * governor's probe adapter does, functions/governor/thread-probe.ts). With solveMode `park` it
 * runs the parked design (lab/sim/parked.ts).
 */
function governorPolicy(settings: FleetSettings): Policy {
  // The simulator makes the probe submission a decision asks for (as functions/governor/thread-probe.ts does).
  // The timing the deployed governor runs with (its metric window from CloudWatch, read once a minute).
  const config = governorConfigFrom(settings, { probeSubmissions: true, ...cloudWatchTiming(settings.tickMs) });
  let state: GovernorState | undefined;
  return {
    name: 'governor',
    capacity: 'lambda',
    parked: settings.solveMode === 'park',
    periodSeconds: settings.tickMs / 1000,
    initialTarget: () => initialState(config, 0).ceilings.normal,
    tick(view: PolicyView): ControlAction {
      state ??= initialState(config, view.nowMs);
      const { primary, state: next } = decideTick(view.governorSignals(), state, config);
      state = next;
      return {
        ...governorAction(primary, settings),
        enabled: !primary.paused && primary.enabled.normal,
        reason: primary.reason.code,
        probe: primary.probe,
        ...(primary.spendGrant ? { grant: primary.spendGrant } : {}),
        ...(primary.liftHold !== undefined ? { liftHold: primary.liftHold } : {}),
      };
    },
  };
}

/** The seeds' one-process script; `max` workers (20 as written). */
function threadPool(name: PolicyName, m: ModelParams, max: number): Policy {
  let workers = 2;
  return {
    name,
    capacity: 'pool',
    periodSeconds: 10,
    workerStartSeconds: m.threadStartSeconds,
    initialTarget: () => workers,
    tick(view) {
      const utilization = view.workers > 0 ? view.busy / view.workers : 0;
      if (view.backlog > 20 && utilization > 0.7) {
        if (view.balance < 1) return { target: workers, reason: 'LOW_BALANCE_NO_SCALE_UP' };
        workers = Math.min(max, workers + 2);
        return { target: workers, reason: 'UP' };
      }
      if (view.backlog < 5 && utilization < 0.2) {
        workers = Math.max(2, workers - 1);
        return { target: workers, reason: 'DOWN' };
      }
      return { target: workers, reason: 'HOLD' };
    },
  };
}

/** The seeds' multi-process script; `max` processes (16 as written). */
function processPool(name: PolicyName, m: ModelParams, max: number): Policy {
  let workers = 2;
  return {
    name,
    capacity: 'pool',
    periodSeconds: 15,
    workerStartSeconds: m.processStartSeconds,
    initialTarget: () => workers,
    tick(view) {
      if (view.backlog > 5 * workers) {
        workers = Math.min(max, workers + Math.max(1, Math.floor(view.backlog / 10)));
        return { target: workers, reason: 'UP' };
      }
      if (view.backlog < 3) {
        workers = Math.max(2, workers - 2);
        return { target: workers, reason: 'DOWN' };
      }
      return { target: workers, reason: 'HOLD' };
    },
  };
}

/** The HPA algorithm (autoscaling/v2 defaults) on an external AverageValue metric; `max` replicas (20 as written). */
function hpa(name: PolicyName, m: ModelParams, max: number): Policy {
  const targetPerReplica = 10;
  const tolerance = 0.1;
  const min = 2;
  const stabilizationSeconds = 300;
  let replicas = 3;
  const history: { at: number; desired: number }[] = [];
  return {
    name,
    capacity: 'pool',
    periodSeconds: 15,
    workerStartSeconds: m.podStartSeconds,
    initialTarget: () => replicas,
    tick(view) {
      const ratio = view.backlog / (targetPerReplica * replicas);
      let desired = Math.abs(ratio - 1) <= tolerance ? replicas : Math.ceil(view.backlog / targetPerReplica);
      desired = Math.min(max, Math.max(min, desired));
      // Scale-down stabilization: act on the highest recommendation of the last 300 s.
      history.push({ at: view.now, desired });
      while ((history[0]?.at ?? Infinity) < view.now - stabilizationSeconds) history.shift();
      let stabilized = desired;
      if (desired < replicas) stabilized = Math.min(replicas, Math.max(...history.map((h) => h.desired)));
      // Default scale-up policies: the larger of +4 pods and +100 % per period.
      const upLimit = Math.max(replicas + 4, replicas * 2);
      const next = Math.min(stabilized, upLimit);
      const reason = next > replicas ? 'UP' : next < replicas ? 'DOWN' : 'HOLD';
      replicas = next;
      return { target: replicas, reason };
    },
  };
}
