/**
 * DynamoDB tables: results (one record per task, expiring through TTL), the governor's state and,
 * when the fleet parks (solveMode `park`), the thread leases. On demand (traffic comes in bursts),
 * point-in-time recovery on, AWS-owned encryption.
 */
import { RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';
import type { FleetSettings } from '../functions/core/settings.js';
import type { TableRemoval } from './config.js';

/** TTL attribute of result records (epoch seconds; see TaskResult.expiresAt). */
export const RESULT_TTL_ATTRIBUTE = 'expiresAt';

/** Properties of {@link FleetTables}. */
export interface FleetTablesProps {
  /** Fleet settings: the table names. */
  readonly settings: FleetSettings;
  /**
   * What happens to the results table when the stack is deleted.
   * @default 'retain'
   */
  readonly resultsRemoval?: TableRemoval;
}

/** The results table, the governor's state table and the thread leases. */
export class FleetTables extends Construct {
  /** Results, key `taskId`. */
  public readonly results: dynamodb.Table;
  /** Governor state, key `id` (one item: GOVERNOR_STATE_ID). */
  public readonly governor: dynamodb.Table;
  /**
   * Thread leases of the parked design, key `shard` + `slot` (functions/core/thread-leases.ts);
   * undefined when the consumers wait through their solves (solveMode `wait`).
   */
  public readonly leases: dynamodb.Table | undefined;

  constructor(scope: Construct, id: string, props: FleetTablesProps) {
    super(scope, id);
    const { settings } = props;
    this.results = new dynamodb.Table(this, 'Results', {
      tableName: settings.tableNames.results,
      partitionKey: { name: 'taskId', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      timeToLiveAttribute: RESULT_TTL_ATTRIBUTE,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      removalPolicy: (props.resultsRemoval ?? 'retain') === 'destroy' ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN,
    });
    this.governor = new dynamodb.Table(this, 'GovernorState', {
      tableName: settings.tableNames.governor,
      partitionKey: { name: 'id', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      // The state rebuilds itself within a tick; keeping it would only block a redeploy under the same name.
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.leases =
      settings.solveMode === 'park'
        ? new dynamodb.Table(this, 'Leases', {
            tableName: settings.tableNames.leases,
            partitionKey: { name: 'shard', type: dynamodb.AttributeType.STRING },
            sortKey: { name: 'slot', type: dynamodb.AttributeType.NUMBER },
            billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
            pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
            // A lease lives at most a solve's deadline: nothing in it outlasts a redeploy.
            removalPolicy: RemovalPolicy.DESTROY,
          })
        : undefined;
  }
}
