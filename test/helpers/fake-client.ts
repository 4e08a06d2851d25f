/**
 * A stand-in for an AWS SDK client no emulator here serves (Lambda's control plane, CloudWatch):
 * its `send` records each command by name and input, and answers from a function, so a test can
 * assert on the requests.
 */
import { vi } from 'vitest';

export interface Sent {
  command: string;
  input: Record<string, any>;
}

/** A client whose `send` records each command and answers from `answer(commandName, input)`. */
export function fakeClient<T>(answer: (command: string, input: any) => unknown) {
  const sent: Sent[] = [];
  const client = {
    send: vi.fn(async (command: { constructor: { name: string }; input: any }) => {
      const name = command.constructor.name;
      sent.push({ command: name, input: command.input });
      return answer(name, command.input);
    }),
  } as unknown as T;
  return { client, sent };
}
