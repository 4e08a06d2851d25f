/** Waits in the end-to-end tests on the local runtime. */
import { sleep } from '../../functions/core/helpers/time.js';

/** Polls `what` every 100 ms until it holds or `ms` pass; whether it held at the end. */
export async function until(what: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (what()) return true;
    await sleep(100);
  }
  return what();
}
