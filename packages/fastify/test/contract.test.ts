/**
 * The HTTP contract suite on Fastify: each limit is a registration of the plugin (global), the second in a
 * child context of the first and so on, the routes in the innermost (the limits of one registration count
 * a request once between them, so stacked limits are registrations of their own); `trustProxy` set to the
 * loopback address when the suite trusts the proxy.
 */
import type { AddressInfo } from 'node:net'
import { Readable } from 'node:stream'
import { type SluicePluginOptions, sluice } from '@sluice/fastify'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import { type ContractAdapter, httpContract } from '../../../test/http-contract/index.ts'

const adapter: ContractAdapter = {
  name: 'fastify',
  where: 'sluice',
  async start({ limits, routes, trustProxy }) {
    const app = Fastify(trustProxy === true ? { trustProxy: '127.0.0.1' } : {})
    const limited = async (scope: FastifyInstance, rest: typeof limits): Promise<void> => {
      if (rest.length > 0) {
        await scope.register(sluice, rest[0] as SluicePluginOptions)
        await scope.register((child) => limited(child, rest.slice(1)))
        return
      }
      for (const route of routes) {
        scope.route({
          method: route.method,
          url: route.path,
          handler: async (request, reply) => {
            const answer = await route.handle(request.rateLimit)
            reply.code(answer.status)
            if (answer.stream !== undefined)
              return reply.type('text/plain').send(Readable.from(answer.stream))
            return answer.body
          },
        })
      }
    }
    try {
      await app.register((root) => limited(root, limits))
      await app.listen({ port: 0, host: '127.0.0.1' })
    } catch (error) {
      await app.close()
      throw error
    }
    const { port } = app.server.address() as AddressInfo
    return {
      url: `http://127.0.0.1:${port}`,
      close: async () => {
        app.server.closeAllConnections()
        await app.close()
      },
    }
  },
  keyFromHeader: (header) => (request: FastifyRequest) => request.headers[header] as string | undefined,
  countWhen: (when) => (_request: FastifyRequest, reply: FastifyReply) => when(reply.statusCode),
  onLimited: (answer) => async (_request: FastifyRequest, reply: FastifyReply, decision: never) => {
    const own = await answer(decision)
    if (own === undefined) return undefined
    reply.code(own.status).type('application/json').send(own.body)
    return reply
  },
}

httpContract(adapter)
