/** Rewrites schema/task-v1.schema.json from the zod schema (`npm run schema`). */
import { writeFileSync } from 'node:fs';
import { taskJsonSchema } from '../functions/core/task.js';

const target = new URL('../schema/task-v1.schema.json', import.meta.url);
writeFileSync(target, `${JSON.stringify(taskJsonSchema(), null, 2)}\n`);
console.log(`wrote ${target.pathname}`);
