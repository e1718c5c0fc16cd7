import { watchParent } from '../parent-watch.js';

/**
 * How `dpctl apply` stops when asked to: SIGINT (Ctrl-C), SIGTERM (a CI job cancelled, a process
 * manager) or, under npm (`npx dpctl apply`, an npm script), the death of the parent. The first
 * request aborts `signal`: the changes in flight finish, no more start, and the apply reports what
 * it did (what was applied is on the server; the next apply finishes the rest), as `terraform apply`
 * does on its first interrupt. A second SIGINT or SIGTERM exits at once. Without this, a signal
 * killed the process between two writes, and a SIGTERM to npm alone left it applying on, re-parented.
 */
export function stopOnInterrupt(): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const stop = (why: string) => {
    if (controller.signal.aborted) {
      process.stderr.write(`dpctl: ${why} again: exiting at once\n`);
      process.exit(130);
    }
    process.stderr.write(`dpctl: ${why}: finishing the changes in flight, starting no more (again to exit at once)\n`);
    controller.abort(new Error(why));
  };
  const onSigint = () => stop('interrupted (SIGINT)');
  const onSigterm = () => stop('stopped (SIGTERM)');
  process.on('SIGINT', onSigint);
  process.on('SIGTERM', onSigterm);
  const unwatch = watchParent(() => stop('the parent process (npm) exited'));
  return {
    signal: controller.signal,
    dispose() {
      process.off('SIGINT', onSigint);
      process.off('SIGTERM', onSigterm);
      unwatch();
    },
  };
}
