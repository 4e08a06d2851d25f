/**
 * `build` once per process, shared by concurrent callers; a failure is not kept, so the next
 * call builds again (a secret briefly unreadable at cold start must not poison the container).
 */
export function onceUntilFailure<T>(build: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () => {
    pending ??= build().catch((error: unknown) => {
      pending = undefined;
      throw error;
    });
    return pending;
  };
}
