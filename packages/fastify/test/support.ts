/**
 * @module What the Fastify tests share: a manual clock, apps built with the plugin, a handler that records
 * what reached it, and stores that record or fail.
 */
import { MemoryStore, type Rule, type RuleDecision, type Store, type StoreMode } from '@sluice/core'
import { type SluicePluginOptions, sluice } from '@sluice/fastify'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'

/** A memory store on a clock the test moves. 1,000,000 ms is 20 s before a minute boundary. */
export function clocked(start = 1_000_000) {
  const clock = { now: start }
  return { clock, store: new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 }) }
}

/** A handler answering `{ ok, remaining }` from `request.rateLimit`; counts its calls. */
export function handler() {
  const calls: FastifyRequest[] = []
  const handle = async (request: FastifyRequest, _reply: FastifyReply) => {
    calls.push(request)
    return { ok: true, remaining: request.rateLimit?.remaining ?? null }
  }
  return { calls, handle }
}

/** An app with the plugin registered, routes added by `routes`, ready. */
export async function app(
  options: SluicePluginOptions,
  routes: (app: FastifyInstance) => void,
  fastifyOptions: { trustProxy?: boolean } = {},
): Promise<FastifyInstance> {
  const instance = Fastify(fastifyOptions)
  await instance.register(sluice, options)
  routes(instance)
  await instance.ready()
  return instance
}

/** A MemoryStore that notes the prefix of every call, to see which limiter counted. */
export class RecordingStore implements Store {
  readonly inner: MemoryStore
  readonly calls: { prefix: string; key: string }[] = []
  constructor(inner: MemoryStore) {
    this.inner = inner
  }
  apply(prefix: string, key: string, rules: readonly Rule[], cost: number, mode: StoreMode): RuleDecision[] {
    this.calls.push({ prefix, key })
    return this.inner.apply(prefix, key, rules, cost, mode)
  }
  reset(prefix: string, key: string): void {
    this.inner.reset(prefix, key)
  }
}

/** A store whose every call fails, as a Redis that is down. */
export const brokenStore = (): Store => ({
  apply: () => Promise.reject(new Error('connection refused')),
  reset: () => undefined,
})
