/** The live progress line of `start`: redrawn on a TTY, a line every 2 s otherwise. */
import type { DemoProgress } from '../../../local/demo.js';

/** One redrawn line on a TTY; a line every 2 s otherwise (logs stay readable). */
export function progressPrinter(stream: NodeJS.WriteStream, total: number) {
  const tty = stream.isTTY === true;
  let lastLine = 0;
  let drawn = false;
  // Per lane: backlog (visible) / in flight (received, not yet deleted) / ceiling ("off" while the
  // lane's mapping is disabled); waiting (delayed) only when there is any. Words: docs/local.md.
  const lane = (name: string, l: DemoProgress['lanes']['high']) =>
    `${name} ${l.backlog}/${l.inFlight}/${l.ceiling === 0 ? 'off' : l.ceiling}`;
  const line = (p: DemoProgress) =>
    `[${(p.elapsedMs / 1000).toFixed(1).padStart(5)}s] sent ${p.submitted}/${total} · ${lane('high', p.lanes.high)} · ${lane('normal', p.lanes.normal)} (backlog/in flight/ceiling) · ` +
    `solved ${p.solved} · failed ${p.failed} · rejected ${p.rejected} · DLQ ${p.dlqDepth} · p95 ${p.p95Ms === undefined ? '–' : `${Math.round(p.p95Ms)} ms`} · ` +
    `ceiling ${p.ceiling}${p.governorReason ? ` (${p.governorReason})` : ''}` +
    `${p.overflow ? ` · overflow ${p.overflow.inFlight}/${p.overflow.ceiling === 0 ? 'off' : p.overflow.ceiling} solved ${p.overflow.solved}` : ''}` +
    `${waiting(p) ? ` · waiting ${waiting(p)}` : ''}${p.unknown ? ` · unknown status ${p.unknown}` : ''}`;
  const waiting = (p: DemoProgress) => p.lanes.high.waiting + p.lanes.normal.waiting;
  return {
    update(p: DemoProgress) {
      if (tty) {
        stream.write(`\r\x1b[2K${line(p)}`);
        drawn = true;
      } else if (p.elapsedMs - lastLine >= 2_000 || lastLine === 0) {
        stream.write(`${line(p)}\n`);
        lastLine = Math.max(1, p.elapsedMs);
      }
    },
    done() {
      if (tty && drawn) stream.write('\n');
    },
  };
}
