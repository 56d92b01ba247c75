/**
 * A child process for the multi-process Redis suites (the protocol: caller.mjs). It runs the built packages
 * (@sluice/core and @sluice/redis resolve to their dist through test/node_modules), so `pnpm build` must
 * have run.
 */
import { RedisStore } from '@sluice/redis'
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import { serveCalls } from './caller.mjs'

serveCalls(async (s) => {
  let client
  let close
  if (s.client === 'ioredis') {
    client = new Redis({ host: s.host, port: s.port, lazyConnect: true, enableOfflineQueue: false })
    client.on('error', () => {})
    await client.connect()
    close = async () => client.disconnect()
  } else {
    client = createClient({ socket: { host: s.host, port: s.port }, disableOfflineQueue: true })
    client.on('error', () => {})
    await client.connect()
    close = async () => client.destroy()
  }
  return { store: new RedisStore({ client, timeoutMs: s.timeoutMs ?? 5000 }), close }
})
