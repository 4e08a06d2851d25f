// Placeholder so the stack can bundle while the governor handler is being written; replaced by it.
export const handler = async (): Promise<never> => {
  throw new Error('governor handler not built yet');
};
