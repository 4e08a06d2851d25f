/**
 * The EventBridge bus that carries one completion event per terminal result. Producers
 * subscribe with their own rules (a Lambda, a queue, an HTTP endpoint).
 */
import * as events from 'aws-cdk-lib/aws-events';
import { Construct } from 'constructs';
import type { FleetSettings } from '../functions/core/settings.js';

export interface CompletionEventsProps {
  settings: FleetSettings;
}

export class CompletionEvents extends Construct {
  public readonly bus: events.EventBus;

  constructor(scope: Construct, id: string, props: CompletionEventsProps) {
    super(scope, id);
    this.bus = new events.EventBus(this, 'Bus', {
      eventBusName: `${props.settings.prefix}-events`,
      description: 'captcha-fleet completion events (solved, failed, rejected)',
    });
  }
}
