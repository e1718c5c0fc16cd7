import type { FastifyInstance } from 'fastify';
import type { Runtime } from './runtime.js';

/** Background work beside a runtime (the scheduler, the retention sweeps). */
export interface RuntimeWorker {
  start(): void;
  stop(): Promise<void>;
}

/**
 * One worker per runtime: `of(rt)` makes it on first use (tests reach it there too), and
 * `install(app, rt)` starts it when the service is ready (after the runtime) and stops it before
 * the service closes.
 */
export function runtimeWorker<W extends RuntimeWorker>(make: (rt: Runtime) => W) {
  const workers = new WeakMap<Runtime, W>();
  const of = (rt: Runtime): W => {
    let worker = workers.get(rt);
    if (!worker) workers.set(rt, (worker = make(rt)));
    return worker;
  };
  const install = (app: FastifyInstance, rt: Runtime): W => {
    const worker = of(rt);
    app.addHook('onReady', async () => worker.start());
    app.addHook('preClose', async () => worker.stop());
    return worker;
  };
  return { of, install };
}
