/**
 * The EventBridge bus that carries one completion event per terminal result. Producers
 * subscribe with their own rules (a Lambda, a queue, an HTTP endpoint).
 *
 * Its resource policy denies PutEvents to every principal but the publishers the stack names
 * (the consumer's role, and the overflow consumer's when there is one), and to those any other
 * source or detail-type than the fleet's. An
 * explicit deny in a resource policy overrides any allow, so an identity policy with
 * `events:PutEvents` on `*` elsewhere in the account cannot publish here.
 */
import * as events from 'aws-cdk-lib/aws-events';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { COMPLETION_EVENT_DETAIL_TYPE } from '../functions/core/events.js';
import type { FleetSettings } from '../functions/core/settings.js';

/** Properties of {@link CompletionEvents}. */
export interface CompletionEventsProps {
  /** Fleet settings: the bus is named `<prefix>-events`, its events' source is `settings.eventSource`. */
  readonly settings: FleetSettings;
}

/** The fleet's completion-event bus and its publishing policy. */
export class CompletionEvents extends Construct {
  /** The bus (`<prefix>-events`). */
  public readonly bus: events.EventBus;
  readonly #settings: FleetSettings;

  constructor(scope: Construct, id: string, props: CompletionEventsProps) {
    super(scope, id);
    this.#settings = props.settings;
    this.bus = new events.EventBus(this, 'Bus', {
      eventBusName: `${props.settings.prefix}-events`,
      description: 'captcha-fleet completion events (solved, failed, rejected)',
    });
  }

  /**
   * Make `publishers` the only principals that may put events on the bus, and only with the fleet's
   * source and detail-type. Call once, with the consumers' roles.
   */
  admitOnly(...publishers: iam.IRole[]): void {
    const roleArns = publishers.map((role) => role.roleArn);
    const putEvents = (sid: string, condition: Record<string, Record<string, unknown>>) =>
      this.bus.addToResourcePolicy(
        new iam.PolicyStatement({
          sid,
          effect: iam.Effect.DENY,
          principals: [new iam.AnyPrincipal()],
          actions: ['events:PutEvents'],
          resources: [this.bus.eventBusArn],
          conditions: condition,
        }),
      );
    // aws:PrincipalArn is the role's ARN for any session of the role. A negated operator with a list
    // is true when the principal matches none of them: every other principal is denied.
    putEvents('OnlyTheConsumerPublishes', {
      ArnNotEquals: { 'aws:PrincipalArn': roleArns.length === 1 ? roleArns[0] : roleArns },
    });
    putEvents('OnlyTheFleetSource', { StringNotEquals: { 'events:source': this.#settings.eventSource } });
    putEvents('OnlyCompletionEvents', { StringNotEquals: { 'events:detail-type': COMPLETION_EVENT_DETAIL_TYPE } });
  }
}
