// The generated benchmark's worker thread: loads the TypeScript worker through tsx (a worker
// thread does not inherit the CLI's loader on Node 20), see lab/generate-worker.ts.
import { register } from 'tsx/esm/api';

register();
await import('./generate-worker.ts');
