/**
 * GraphQL resolvers limited through `getRequestResponse`, on a real Apollo server (`@nestjs/graphql` with
 * `@nestjs/apollo`, on Nest's Express platform) answering real HTTP requests: the module's limit on a
 * plain resolver, a resolver's own `@RateLimit`, `@SkipRateLimit`, what a denied query answers, and an
 * exception filter giving the denial a code of its own.
 * Without `getRequestResponse`, resolvers pass untouched.
 */
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo'
import { Catch, Module, type Provider, type Type } from '@nestjs/common'
import { APP_FILTER } from '@nestjs/core'
import { type GqlExceptionFilter, GqlExecutionContext, GraphQLModule, Query, Resolver } from '@nestjs/graphql'
import { fixedWindow } from '@sluice/core'
import { GraphQLError } from 'graphql'
import { afterEach, describe, expect, it } from 'vitest'
import {
  RateLimit,
  RateLimitedException,
  SkipRateLimit,
  SluiceModule,
  type SluiceModuleOptions,
} from '../src/index.ts'
import { clocked, platforms, type Running, start } from './support.ts'

@Resolver()
class GreetingResolver {
  @Query(() => String)
  hello() {
    return 'hello'
  }

  @Query(() => String)
  @RateLimit({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })] })
  scarce() {
    return 'scarce'
  }

  @Query(() => String)
  @SkipRateLimit()
  health() {
    return 'ok'
  }
}

/** Where a GraphQL resolver's HTTP request and response are: the context Apollo was given. */
const getRequestResponse: SluiceModuleOptions['getRequestResponse'] = (context) => {
  if (context.getType<string>() !== 'graphql') return undefined
  const { req, res } = GqlExecutionContext.create(context).getContext()
  return { req, res }
}

/** Answers a denied query with an error code of its own, and the seconds to wait. */
@Catch(RateLimitedException)
class RateLimitedFilter implements GqlExceptionFilter {
  catch(exception: RateLimitedException) {
    return new GraphQLError(exception.message, {
      extensions: { code: 'RATE_LIMITED', retryAfter: Math.ceil(exception.decision.retryAfterMs / 1000) },
    })
  }
}

function appModule(options: SluiceModuleOptions, providers: Provider[] = []): Type<unknown> {
  @Module({
    imports: [
      GraphQLModule.forRoot<ApolloDriverConfig>({
        driver: ApolloDriver,
        autoSchemaFile: true,
        context: ({ req, res }: { req: unknown; res: unknown }) => ({ req, res }),
      }),
      SluiceModule.forRoot(options),
    ],
    providers: [GreetingResolver, ...providers],
  })
  class AppModule {}
  return AppModule
}

const express = platforms.find((p) => p.name === 'express')!
const running: Running[] = []
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.close()))
})

async function run(options: SluiceModuleOptions, providers: Provider[] = []): Promise<Running> {
  const r = await start(express, appModule(options, providers))
  running.push(r)
  return r
}

function query(app: Running, q: string): Promise<Response> {
  return app.get('/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: `{ ${q} }` }),
  })
}

describe('@sluice/nestjs with @nestjs/graphql (Apollo, Express platform)', () => {
  it("limits a resolver by the module's options through getRequestResponse, each resolver counting on its own", async () => {
    const { store } = clocked()
    const app = await run({ rules: [fixedWindow({ limit: 2, windowMs: 60_000 })], store, getRequestResponse })
    const first = await query(app, 'hello')
    expect(first.status).toBe(200)
    expect(await first.json()).toEqual({ data: { hello: 'hello' } })
    expect(first.headers.get('ratelimit-policy')).toBe('"2-per-60s";q=2;w=60')
    expect(first.headers.get('ratelimit')).toBe('"2-per-60s";r=1;t=60')
    expect((await query(app, 'hello')).status).toBe(200)
    // A denied query: GraphQL's convention, as Apollo answers it (its own status and content type), with
    // sluice's rate-limit headers and Retry-After on the response and the denial as the query's error.
    const denied = await query(app, 'hello')
    expect(denied.status).toBe(200)
    expect(denied.headers.get('content-type')).toBe('application/json; charset=utf-8')
    expect(denied.headers.get('retry-after')).toBe('60')
    expect(denied.headers.get('ratelimit')).toBe('"2-per-60s";r=0;t=60')
    expect(await denied.json()).toEqual({
      data: null,
      errors: [
        {
          message: 'Rate limit 2-per-60s exceeded; retry in 60 s.',
          locations: [{ line: 1, column: 3 }],
          path: ['hello'],
          extensions: { code: 'INTERNAL_SERVER_ERROR' },
        },
      ],
    })
    // Another resolver counts on its own: its own rule, one a minute.
    const scarce = []
    for (let i = 0; i < 2; i++)
      scarce.push((await (await query(app, 'scarce')).json()) as Record<string, unknown>)
    expect(scarce[0]).toEqual({ data: { scarce: 'scarce' } })
    expect(scarce[1]).toMatchObject({
      data: null,
      errors: [{ message: 'Rate limit 1-per-60s exceeded; retry in 60 s.', path: ['scarce'] }],
    })
  })

  it('gives a denied query an error code of its own through an exception filter', async () => {
    const { store } = clocked()
    const app = await run(
      { rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store, getRequestResponse },
      [{ provide: APP_FILTER, useClass: RateLimitedFilter }],
    )
    expect((await query(app, 'hello')).status).toBe(200)
    const denied = await query(app, 'hello')
    expect(denied.headers.get('retry-after')).toBe('60')
    const body = (await denied.json()) as { errors: Array<{ message: string; extensions: unknown }> }
    expect(body.errors.map((e) => [e.message, e.extensions])).toEqual([
      ['Rate limit 1-per-60s exceeded; retry in 60 s.', { code: 'RATE_LIMITED', retryAfter: 60 }],
    ])
  })

  it('lets a @SkipRateLimit resolver through with no headers and no count', async () => {
    const { store } = clocked()
    const app = await run({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store, getRequestResponse })
    for (let i = 0; i < 3; i++) {
      const res = await query(app, 'health')
      expect(res.status).toBe(200)
      expect(await res.json()).toEqual({ data: { health: 'ok' } })
      expect(res.headers.get('ratelimit')).toBeNull()
    }
  })

  it('passes resolvers untouched without getRequestResponse', async () => {
    const { store } = clocked()
    const app = await run({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store })
    for (let i = 0; i < 3; i++) {
      const res = await query(app, 'scarce')
      expect(res.status).toBe(200)
      expect(res.headers.get('ratelimit')).toBeNull()
    }
  })
})
