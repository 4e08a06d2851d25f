/**
 * CDK entry: reads context (`-c planThreads=50 -c alarmEmail=…`) and builds the stack.
 * A configuration problem ends the synth with one message listing every problem and its fix.
 */
import { App } from 'aws-cdk-lib';
import { ConfigError } from '../functions/core/settings.js';
import { addFleetStack } from '../lib/fleet-app.js';

const app = new App();
try {
  addFleetStack(app);
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  console.error(error.message);
  process.exit(1);
}
