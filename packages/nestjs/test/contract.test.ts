/**
 * The HTTP contract suite on Nest, on its Express and its Fastify platform: the limit is the module's
 * (`SluiceModule.forRoot(options)`, the global guard), the routes are handlers of one controller built for
 * the case, answering from `req.rateLimit`; `trust proxy` (Express) or `trustProxy` (Fastify) set to
 * loopback when the suite trusts the proxy. A Nest route has one limit (its options merged from method,
 * class and module), so the suite's two cases of limits stacked on one route are not Nest's to run.
 */
import 'reflect-metadata'
import type { AddressInfo } from 'node:net'
import { Readable } from 'node:stream'
import { Controller, Get, Module, Post, Req, Res, StreamableFile, type Type } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import { type ContractAdapter, type ContractApp, httpContract } from '../../../test/http-contract/index.ts'
import {
  type PlatformRequest,
  type PlatformResponse,
  SluiceModule,
  type SluiceModuleOptions,
} from '../src/index.ts'

type Platform = 'express' | 'fastify'

/** A controller with one handler per route of the case, decorated as a user's would be. */
function controllerOf(app: ContractApp, platform: Platform): Type<unknown> {
  class ContractController {}
  const prototype = ContractController.prototype as unknown as Record<string, unknown>
  app.routes.forEach((route, i) => {
    const name = `route${i}`
    prototype[name] = async (req: PlatformRequest, res: PlatformResponse) => {
      const reply = await route.handle(req.rateLimit)
      if (platform === 'fastify') res.code(reply.status)
      else res.status(reply.status)
      if (reply.stream !== undefined)
        return new StreamableFile(Readable.from(reply.stream), { type: 'text/plain' })
      return reply.body
    }
    Req()(prototype, name, 0)
    Res({ passthrough: true })(prototype, name, 1)
    const descriptor = Object.getOwnPropertyDescriptor(prototype, name)!
    ;(route.method === 'GET' ? Get : Post)(route.path)(prototype, name, descriptor)
  })
  Controller()(ContractController)
  return ContractController
}

function adapterOn(platform: Platform): ContractAdapter {
  return {
    name: `nestjs (${platform})`,
    where: 'SluiceModule.forRoot',
    async start(contract) {
      const [options] = contract.limits
      @Module({
        imports: [SluiceModule.forRoot(options as SluiceModuleOptions)],
        controllers: [controllerOf(contract, platform)],
      })
      class ContractModule {}
      const http =
        platform === 'fastify'
          ? new FastifyAdapter(contract.trustProxy === true ? { trustProxy: '127.0.0.1' } : {})
          : new ExpressAdapter()
      const app = await NestFactory.create(ContractModule, http, { logger: false, abortOnError: false })
      if (platform === 'express' && contract.trustProxy === true) {
        ;(app as NestExpressApplication).set('trust proxy', 'loopback')
      }
      try {
        await app.listen(0, '127.0.0.1')
      } catch (error) {
        await app.close()
        throw error
      }
      const server = app.getHttpServer()
      const { port } = server.address() as AddressInfo
      return {
        url: `http://127.0.0.1:${port}`,
        close: async () => {
          server.closeAllConnections()
          await app.close()
        },
      }
    },
    keyFromHeader: (header) => (req: PlatformRequest) => req.headers[header] as string | undefined,
    countWhen: (when) => (_req: PlatformRequest, res: PlatformResponse) => when(res.statusCode),
    onLimited: (answer) => async (_req: PlatformRequest, res: PlatformResponse, decision: never) => {
      const reply = await answer(decision)
      if (reply === undefined) return
      if (platform === 'fastify') res.code(reply.status).type('application/json').send(reply.body)
      else res.status(reply.status).json(reply.body)
    },
    stacksLimits: false,
  }
}

httpContract(adapterOn('express'))
httpContract(adapterOn('fastify'))
