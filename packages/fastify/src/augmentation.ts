/**
 * @module What the plugin adds to Fastify's types: a route's `config.rateLimit`, `request.rateLimit`
 * and `fastify.rateLimit()`. Written in TypeScript so the augmentation ships in the built `.d.ts`.
 */
import type { Limiter } from '@sluice/core'
import type { RequestRateLimit } from '@sluice/core/http'
import type { FastifyRequest, onRequestHookHandler } from 'fastify'
import type { RouteRateLimitOptions } from './options.ts'

/** The `onRequest` hook `fastify.rateLimit()` returns, with the limiter it counts on (for `peek` and `reset`). */
export type RateLimitHook = onRequestHookHandler & { readonly limiter: Limiter<FastifyRequest> }

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * This route's limit: options merged over the plugin's (a route that sets `rules`, `store`, `prefix`
     * or `onStoreError` gets a limiter of its own), or `false` for a route the plugin leaves alone.
     */
    rateLimit?: RouteRateLimitOptions | false
  }

  interface FastifyRequest {
    /**
     * The decision of the sluice limit that last counted this request, allowed or denied, with
     * `settle(cost)`: the request's true cost, settled now (see `RequestRateLimit`). `undefined`
     * when none did: not limited, skipped, or a missing key part under `onMissingKey: 'skip'`.
     */
    readonly rateLimit: RequestRateLimit | undefined
  }

  interface FastifyInstance {
    /**
     * An `onRequest` hook limiting the routes it is given to: `{ onRequest: fastify.rateLimit({ ... }) }`.
     * Options are merged over the plugin's; without options it is the plugin's own limit. One call is one
     * limit: routes sharing the returned hook share its counts.
     */
    rateLimit(options?: RouteRateLimitOptions): RateLimitHook
  }
}
