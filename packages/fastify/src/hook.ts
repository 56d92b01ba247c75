/**
 * @module The per-request hook of one limit: core's HTTP kit decides, this file writes the outcome on the
 * reply and goes on, holds the request (leaky-bucket queue), or hands a `RateLimitRejection` to Fastify's
 * error path. Callback style: it stops the chain by not calling `done`.
 */
import {
  type HttpAdapter,
  type HttpOutcome,
  headerValues,
  type RequestLimit,
  type RequestRecord,
  type RequestView,
} from '@sluice/core/http'
import { isPromise } from '@sluice/core/options'
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction, onRequestHookHandler } from 'fastify'
import type { OnLimited } from './options.ts'
import { denial, missingKey, type RateLimitRejection } from './rejection.ts'

type Request = FastifyRequest

/** The slot every request is decorated with, holding its sluice record (null until a limit sees it). */
export const RECORD = Symbol('sluice.record')

type Slot = Record<typeof RECORD, RequestRecord | null>

/**
 * How sluice reads a Fastify request. `'ip'` is `request.ip`, so Fastify's `trustProxy` decides whether
 * `X-Forwarded-For` counts. `'route'` is the method and the route's URL template
 * (`request.routeOptions.url`, e.g. `GET /users/:id`), never the raw URL. Headers are read line by line.
 */
const view: RequestView<Request> = {
  ip: (request) => request.ip,
  route: (request) => routeOf(request) ?? '',
  routeTemplate: (request) => routeOf(request),
  header: (request, name) => headerValues(request.raw, name),
}

/** `METHOD /template` of the matched route, built once per method and template, not per request. */
function routeOf(request: Request): string | undefined {
  const url = request.routeOptions.url
  if (url === undefined) return undefined
  const method = request.method
  if (url === lastRoute.url && method === lastRoute.method) return lastRoute.text
  lastRoute = { url, method, text: `${method} ${url}` }
  return lastRoute.text
}

let lastRoute = { url: '', method: '', text: '' }

/** The adapter for limits that serve any route (the plugin's, `fastify.rateLimit()`'s). */
export const adapter: HttpAdapter<Request, FastifyReply> = {
  view,
  recordOf: (request) => (request as unknown as Slot)[RECORD] ?? undefined,
  keepRecord(request, record) {
    ;(request as unknown as Slot)[RECORD] = record
  },
  responseOf: (reply) => reply.raw,
}

/** The adapter for a limit resolved for one route: its URL is known, so `'route'` need not look it up. */
export function routeAdapter(url: string): HttpAdapter<Request, FastifyReply> {
  let last = { method: '', text: '' }
  const route = (request: Request) => {
    if (request.method !== last.method) last = { method: request.method, text: `${request.method} ${url}` }
    return last.text
  }
  return { ...adapter, view: { ...view, route, routeTemplate: route } }
}

/** What a hook does next: go on (`undefined`), go to the error path, or stop (answered, or client gone). */
const STOP = Symbol('sluice.stop')
type Next = undefined | RateLimitRejection | typeof STOP

/** The `onRequest` hook of one limit. */
export function hookFor(
  limit: RequestLimit<Request, FastifyReply>,
  onLimited: OnLimited | undefined,
): onRequestHookHandler {
  return function sluiceRateLimit(
    request: Request,
    reply: FastifyReply,
    done: HookHandlerDoneFunction,
  ): void {
    const go = done as (next?: unknown) => void
    // On a memory store the outcome is there at once, and the request goes on in the same tick.
    const outcome = limit.consume(request, reply)
    if (outcome instanceof Promise) outcome.then((o) => proceed(limit, o, request, reply, onLimited, go), go)
    else proceed(limit, outcome, request, reply, onLimited, go)
  }
}

/** Writes out an outcome, then goes on (`go()`), to the error path (`go(error)`), or stops. */
function proceed(
  limit: RequestLimit<Request, FastifyReply>,
  outcome: HttpOutcome,
  request: Request,
  reply: FastifyReply,
  onLimited: OnLimited | undefined,
  go: (next?: unknown) => void,
): void {
  let next: Next | Promise<Next>
  try {
    next = respond(limit, outcome, request, reply, onLimited)
  } catch (error) {
    go(error)
    return
  }
  if (isPromise(next)) next.then((n) => n !== STOP && go(n), go)
  else if (next !== STOP) go(next)
}

function respond(
  limit: RequestLimit<Request, FastifyReply>,
  outcome: HttpOutcome,
  request: Request,
  reply: FastifyReply,
  onLimited: OnLimited | undefined,
): Next | Promise<Next> {
  if (outcome.action === 'pass') return undefined
  if (outcome.action === 'reject') {
    // Status and type are set on the reply too, so a user's error handler that sends the rejection keeps them.
    reply.code(400).header('content-type', outcome.contentType)
    return missingKey(outcome.body, outcome.contentType)
  }
  const { decision, headers } = outcome
  for (const name in headers) reply.header(name, headers[name])
  if (outcome.action === 'allow') {
    if (decision.waitMs === 0) return undefined
    return limit.hold(request, reply, outcome).then((waited) => (waited ? undefined : STOP))
  }
  reply.code(outcome.status).header('content-type', outcome.contentType)
  const rejection = denial(decision, outcome.status, headers, outcome.body, outcome.contentType)
  if (onLimited === undefined) return rejection
  // A failing onLimited is an error like any other: sluice's status is withdrawn, so Fastify's error
  // handling picks the status (the error's `statusCode`, else 500).
  const failed = (error: unknown): never => {
    reply.code(200).removeHeader('content-type')
    throw error
  }
  let result: ReturnType<OnLimited>
  try {
    result = onLimited(request, reply, decision)
  } catch (error) {
    return failed(error)
  }
  // It answered when it returned the reply (Fastify's idiom) or the reply is already sent.
  if (isPromise(result)) {
    return Promise.resolve(result).then((r) => (r === reply || reply.sent ? STOP : rejection), failed)
  }
  return result === reply || reply.sent ? STOP : rejection
}
