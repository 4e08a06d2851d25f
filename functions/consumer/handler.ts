// Placeholder so the stack can bundle while the consumer handler is being written; replaced by it.
export const handler = async (): Promise<never> => {
  throw new Error('consumer handler not built yet');
};
