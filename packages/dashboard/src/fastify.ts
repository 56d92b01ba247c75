/**
 * @module `fastifyDashboard`: the dashboard as a Fastify plugin. It registers a catch-all route under the
 * prefix it is registered with and hands the raw request and response to the handler (`reply.hijack()`).
 * Its own scope reads no bodies, so an edit's body reaches the handler unread, with the handler's bound.
 */
import type { IncomingMessage } from 'node:http'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { DashboardServer, locate } from './handler.ts'
import { type DashboardOptions, dashboardConfig } from './options.ts'

/** The dashboard's options; `access` is asked with the raw Node request (`request.raw`). */
export type FastifyDashboardOptions = DashboardOptions<IncomingMessage>

/** Fastify's own registration options, which Fastify hands every plugin with the rest. */
const REGISTER_OPTIONS = ['prefix', 'logLevel', 'logSerializers'] as const

/**
 * `app.register(fastifyDashboard, { prefix: '/sluice', access, client, tables })`: the dashboard under
 * `/sluice/` (and `/sluice` redirecting there). Not wrapped in fastify-plugin on purpose: its routes and its
 * body handling stay in its own scope.
 */
export const fastifyDashboard: FastifyPluginAsync<FastifyDashboardOptions> = async (instance, options) => {
  const own: Record<string, unknown> = { ...options }
  for (const name of REGISTER_OPTIONS) delete own[name]
  const server = new DashboardServer(dashboardConfig(own as unknown as FastifyDashboardOptions))
  const mount = instance.prefix
  instance.removeAllContentTypeParsers()
  instance.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined))
  const handler = (request: FastifyRequest, reply: FastifyReply) => {
    reply.hijack()
    return server.serve(request.raw, reply.raw, locate(request.raw.url ?? '/', mount))
  }
  instance.all('/', handler)
  instance.all('/*', handler)
}
