/**
 * What a consumer's role may do besides reading its queue (its event source grants that): send
 * refused messages to the DLQ, claim and record results, keep its provider's thread ledger, read
 * its provider's key, and publish completion events. One definition for the primary consumer and
 * the overflow consumer, so the two never drift; each names its own ledger item and its own key.
 */
import * as iam from 'aws-cdk-lib/aws-iam';
import { COMPLETION_EVENT_DETAIL_TYPE } from '../functions/core/events.js';
import { THREAD_LEDGER_ID } from '../functions/core/deployment.js';
import { solveWindowSlotIds } from '../functions/core/solve-window.js';
import type { FleetEnvironmentInput } from './fleet-environment.js';
import type { SolverKeySecret } from './solver-key-secret.js';

/** The fleet's resources a consumer works with. */
export type ConsumerResources = Pick<
  FleetEnvironmentInput,
  'settings' | 'queues' | 'resultsTable' | 'governorTable' | 'bus'
>;

/** Whose consumer: the ledger item it writes and the key it solves with. */
export interface ConsumerProvider {
  /** Partition key of its thread ledger (THREAD_LEDGER_ID or OVERFLOW_LEDGER_ID). */
  readonly ledgerId: string;
  /** The secret holding its provider's key (and no other). */
  readonly key: SolverKeySecret;
}

/** An IAM condition that holds a DynamoDB statement to the items of these partition keys. */
export function partitionsOnly(...keys: string[]): Record<string, Record<string, string[]>> {
  return { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': keys } };
}

/** Grant a consumer's role what it needs beyond its queue, for one provider. */
export function grantConsumerWork(role: iam.Role, resources: ConsumerResources, provider: ConsumerProvider): void {
  const { settings, queues } = resources;
  // Malformed and schema-violating messages go to the DLQ with their reason, never dropped.
  queues.deadLetterQueue.grantSendMessages(role);
  // A task near the DLQ (or carrying a paid submission the table would not take) goes back to
  // its own lane as a fresh copy; the event sources already grant the delete of the original.
  queues.normal.grantSendMessages(role);
  queues.high.grantSendMessages(role);
  role.addToPrincipalPolicy(
    new iam.PolicyStatement({
      sid: 'ResultRecords',
      // Single-item conditional reads and writes only (claim, record, release): no scans, no deletes.
      actions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
      resources: [resources.resultsTable.tableArn],
    }),
  );
  role.addToPrincipalPolicy(
    new iam.PolicyStatement({
      sid: 'ThreadLedger',
      // Over-cap answers and held threads for the governor: ADD/SET on one item, and the read a
      // refused invocation waits on. No other key of the governor table.
      actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
      resources: [resources.governorTable.tableArn],
      conditions: partitionsOnly(provider.ledgerId),
    }),
  );
  // The parked design's metric window for the governor (functions/core/solve-window.ts): the
  // primary consumer adds what a delivery saw to its minute's slot, or starts the slot afresh.
  if (settings.solveMode === 'park' && provider.ledgerId === THREAD_LEDGER_ID)
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'SolveWindow',
        actions: ['dynamodb:UpdateItem', 'dynamodb:PutItem'],
        resources: [resources.governorTable.tableArn],
        conditions: partitionsOnly(...solveWindowSlotIds(THREAD_LEDGER_ID)),
      }),
    );
  provider.key.grantRead(role);
  role.addToPrincipalPolicy(
    new iam.PolicyStatement({
      sid: 'CompletionEvents',
      actions: ['events:PutEvents'],
      resources: [resources.bus.eventBusArn],
      // With the bus policy (CompletionEvents.admitOnly), what a subscriber may trust: an event on
      // this bus with source settings.eventSource was put by a consumer's role, i.e. by the consumer's
      // code after it wrote that terminal record (or by whoever may change that code or assume the
      // role). It does not vouch for the task's content (producer input) or the answer (solver
      // output); an event can be missing (a publish that failed after its retries) or arrive twice
      // (EventBridge delivers to targets at least once): the results table stays the source of truth.
      conditions: {
        StringEquals: { 'events:source': settings.eventSource, 'events:detail-type': COMPLETION_EVENT_DETAIL_TYPE },
      },
    }),
  );
}

/** What the governor moves of one consumer function: its mappings' ceilings and states, and its reservation. */
export interface ConsumerControl {
  /** Statement ids: `<sid>` for the mappings, `<concurrencySid>` for the reservation. */
  readonly mappingsSid: string;
  readonly concurrencySid: string;
  readonly mappingArns: readonly string[];
  readonly functionArn: string;
}

/** Let the governor's role move a consumer's mappings and reservation, and nothing else of it. */
export function grantConsumerControl(role: iam.IRole, control: ConsumerControl): void {
  role.addToPrincipalPolicy(
    new iam.PolicyStatement({
      sid: control.mappingsSid,
      actions: ['lambda:GetEventSourceMapping', 'lambda:UpdateEventSourceMapping'],
      resources: [...control.mappingArns],
    }),
  );
  role.addToPrincipalPolicy(
    new iam.PolicyStatement({
      sid: control.concurrencySid,
      actions: ['lambda:GetFunctionConcurrency', 'lambda:PutFunctionConcurrency'],
      resources: [control.functionArn],
    }),
  );
}
