/**
 * @module What every Nest test shares: both platforms, a manual clock, an app listening on a free port,
 * and requests sent to it over real HTTP.
 */
import 'reflect-metadata'
import type { AddressInfo } from 'node:net'
import type { INestApplication, Type } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { ExpressAdapter } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import { MemoryStore } from '@sluice/core'

/** The suites run once per Nest platform. */
export const platforms = [
  { name: 'express', adapter: () => new ExpressAdapter() },
  // Closing the app ends the keep-alive connections the tests' fetch leaves open (Fastify keeps them 72 s).
  { name: 'fastify', adapter: () => new FastifyAdapter({ forceCloseConnections: true }) },
] as const

export type PlatformCase = (typeof platforms)[number]

/** A memory store on a clock the test moves. Starts at the beginning of a minute, so windows align. */
export function clocked(start = 1_000_020_000) {
  const clock = { now: start }
  return { clock, store: new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 }) }
}

export interface Running {
  readonly app: INestApplication
  readonly url: string
  get(path: string, init?: RequestInit): Promise<Response>
  close(): Promise<void>
}

/** Creates the app of `module` on `platform`, listening on 127.0.0.1, without Nest's logs. */
export async function start(platform: PlatformCase, module: Type<unknown>): Promise<Running> {
  // abortOnError: false, so an app that fails to start rejects, as a test can see, instead of aborting.
  const app = await NestFactory.create(module, platform.adapter(), { logger: false, abortOnError: false })
  await app.listen(0, '127.0.0.1')
  const { port } = app.getHttpServer().address() as AddressInfo
  const url = `http://127.0.0.1:${port}`
  return {
    app,
    url,
    get: (path, init) => fetch(`${url}${path}`, init),
    close: () => app.close(),
  }
}

/** Sends `n` requests one after another; their statuses. */
export async function statuses(
  running: Running,
  path: string,
  n: number,
  init?: RequestInit,
): Promise<number[]> {
  const seen: number[] = []
  for (let i = 0; i < n; i++) {
    const res = await running.get(path, init)
    await res.arrayBuffer()
    seen.push(res.status)
  }
  return seen
}
