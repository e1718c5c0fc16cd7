/**
 * The two parts of undici the client uses: its Agent (connection pools) and `request`.
 *
 * undici's entry point loads all of undici (fetch, WebSocket, caches, mocks, proxies...): about
 * 85 ms of CPU at every start of the CLI, two thirds of it for parts the client never uses. The
 * Agent and the request API load alone in about 30 ms. They are the same modules the entry point
 * loads (same classes, same errors, same codes), taken from their files; should a version of
 * undici move them, the entry point is used instead, so this costs start-up time at worst.
 */
import type * as Undici from 'undici';

export type Agent = Undici.Agent;
export type Dispatcher = Undici.Dispatcher;
type RequestOptions = Parameters<typeof Undici.request>[1] & { dispatcher: Dispatcher };
type Request = (url: string, options: RequestOptions) => Promise<Undici.Dispatcher.ResponseData>;

async function load(): Promise<{ Agent: typeof Undici.Agent; request: Request }> {
  try {
    const [agentModule, requestModule] = await Promise.all([
      import('undici/lib/dispatcher/agent.js' as string),
      import('undici/lib/api/api-request.js' as string),
    ]);
    const AgentClass = agentModule.default as typeof Undici.Agent;
    const apiRequest = requestModule.default as (
      this: Dispatcher,
      options: Record<string, unknown>,
    ) => Promise<Undici.Dispatcher.ResponseData>;
    if (typeof AgentClass === 'function' && typeof apiRequest === 'function') {
      // What undici's `request(url, options)` does before it calls the same function on the dispatcher.
      const request: Request = (url, options) => {
        const u = new URL(url);
        return apiRequest.call(options.dispatcher, {
          ...options,
          origin: u.origin,
          path: `${u.pathname}${u.search}`,
          method: options.method ?? 'GET',
        });
      };
      return { Agent: AgentClass, request };
    }
  } catch {
    // Moved or hidden in this version of undici: the entry point below.
  }
  const undici = await import('undici');
  return { Agent: undici.Agent, request: undici.request as unknown as Request };
}

const loaded = await load();

export const UndiciAgent = loaded.Agent;
export const request = loaded.request;
