/**
 * @module How sluice reads and answers through each Nest platform. The guard is given the platform's
 * request and response (Express's `req`/`res`, Fastify's `request`/`reply`); this file tells core's HTTP
 * kit how to read them (address, route template, headers), where a request's record lives, which Node
 * response ends it, and how to set a header or a status, so the guard itself is one translation for both.
 */
import {
  type HttpAdapter,
  headerValues,
  type RequestRateLimit,
  type RequestRecord,
  type RequestView,
} from '@sluice/core/http'
import type { PlatformRequest, PlatformResponse } from './options.ts'

/** A platform, as the guard uses it: core's adapter and the few writes a guard makes itself. */
export type Platform = HttpAdapter<PlatformRequest, PlatformResponse> & PlatformWrites

/** The writes a guard makes itself, through the platform's response. */
interface PlatformWrites {
  setHeader(res: PlatformResponse, name: string, value: string): void
  setStatus(res: PlatformResponse, status: number): void
  /** Whether a response has been sent (by `onLimited`). */
  answered(res: PlatformResponse): boolean
}

/**
 * Each request's record, beside the request rather than on it: a property added per request would give
 * every request a new hidden class. `req.rateLimit` is set from it when a limit counts the request.
 */
const records = new WeakMap<object, RequestRecord>()

function keeper(req: PlatformRequest, record: RequestRecord): void {
  records.set(req, record)
}

/**
 * Sets `req.rateLimit`: the decision of the limit that counted the request, with `settle(cost)` (the
 * record's `RequestRateLimit`).
 */
export function showDecision(req: PlatformRequest, record: RequestRecord | undefined): void {
  ;(req as { rateLimit?: RequestRateLimit }).rateLimit = record?.shown
}

/**
 * `@nestjs/platform-express`. `'ip'` is `req.ip` (Express's `trust proxy` decides whether
 * `X-Forwarded-For` counts); `'route'` is the method and the matched route's path as Nest registered it
 * (global prefix and version included), never the raw URL.
 */
const expressView: RequestView<PlatformRequest> = {
  ip: (req) => req.ip,
  route: (req) => `${req.method} ${String(req.route?.path ?? req.path)}`,
  routeTemplate: (req) => (req.route === undefined ? undefined : `${req.method} ${String(req.route.path)}`),
  header: (req, name) => headerValues(req, name),
}

const express: Platform = {
  view: expressView,
  recordOf: (req) => records.get(req),
  keepRecord: keeper,
  responseOf: (res) => res,
  setHeader: (res, name, value) => res.setHeader(name, value),
  setStatus(res, status) {
    res.statusCode = status
  },
  answered: (res) => res.headersSent === true || res.writableEnded === true,
}

/**
 * `@nestjs/platform-fastify`. `'ip'` is `request.ip` (Fastify's `trustProxy`); `'route'` is the method
 * and the route's URL template (`request.routeOptions.url`); headers are read line by line from the raw
 * request.
 */
const fastifyView: RequestView<PlatformRequest> = {
  ip: (request) => request.ip,
  route: (request) => `${request.method} ${String(request.routeOptions?.url ?? '')}`,
  routeTemplate: (request) => {
    const url = request.routeOptions?.url
    return url === undefined ? undefined : `${request.method} ${String(url)}`
  },
  header: (request, name) => headerValues(request.raw ?? request, name),
}

const fastify: Platform = {
  view: fastifyView,
  recordOf: (request) => records.get(request),
  keepRecord: keeper,
  responseOf: (reply) => reply.raw ?? reply,
  setHeader: (reply, name, value) => reply.header(name, value),
  setStatus: (reply, status) => reply.code(status),
  answered: (reply) => reply.sent === true || reply.raw?.headersSent === true,
}

/**
 * The platform Nest's HTTP adapter names (`getType()`): `'fastify'`, else Express's reading, which also
 * serves a request that is a Node `IncomingMessage` (a GraphQL context on a plain HTTP server).
 */
export function platformOf(type: string | undefined): Platform {
  return type === 'fastify' ? fastify : express
}
