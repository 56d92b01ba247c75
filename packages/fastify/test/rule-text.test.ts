/** Rules written as text in the plugin's options and in route config, through a real Fastify server. */
import { ErrorCode } from '@sluice/core'
import { sluice } from '@sluice/fastify'
import Fastify from 'fastify'
import { describe, expect, it } from 'vitest'
import { app, clocked, handler } from './support.ts'

describe('rules as text', () => {
  it('limits by text in the plugin and in a route config, over the network', async () => {
    const { store } = clocked()
    const a = await app({ rules: ['fixedWindow:2/1m'], store }, (a) => {
      a.get('/a', handler().handle)
      a.post('/pay', { config: { rateLimit: { rules: ['tokenBucket:1+1/m@pay'] } } }, handler().handle)
    })
    try {
      const url = await a.listen({ port: 0, host: '127.0.0.1' })
      const get = async (method: string, path: string) => {
        const res = await fetch(`${url}${path}`, { method })
        await res.arrayBuffer()
        return [res.status, res.headers.get('ratelimit-policy'), res.headers.get('retry-after')]
      }
      expect(await get('GET', '/a')).toEqual([200, '"2-per-60s";q=2;w=60', null])
      expect(await get('GET', '/a')).toEqual([200, '"2-per-60s";q=2;w=60', null])
      expect(await get('GET', '/a')).toEqual([429, '"2-per-60s";q=2;w=60', '20'])
      expect(await get('POST', '/pay')).toEqual([200, '"pay";q=1;w=60', null])
      expect(await get('POST', '/pay')).toEqual([429, '"pay";q=1;w=60', '60'])
    } finally {
      await a.close()
    }
  })

  it('refuses text outside the grammar when the plugin registers, naming the option', async () => {
    const a = Fastify()
    await expect(a.register(sluice, { rules: ['leakyBucket:5/s~'] }).ready()).rejects.toMatchObject({
      code: ErrorCode.INVALID_OPTION,
      option: 'sluice.rules[0]',
      value: 'leakyBucket:5/s~',
    })
    await a.close()
  })
})
