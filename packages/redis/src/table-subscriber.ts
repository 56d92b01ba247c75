/**
 * @module The limit table's connections: its pub/sub subscriber (a duplicate of the user's client, which
 * both libraries resubscribe by themselves on reconnect) and the wait for a client that is still
 * connecting. What the subscriber hears is only ever a hint to read Redis: the table never takes a
 * notice's content as data.
 */
import { InvalidOptionError } from '@sluice/core'

/** The subscriber connection, whichever library made it. */
export interface Subscriber {
  close(): void
}

/**
 * Resolves once `client` can take commands: at once when it is ready (or of a kind that does not say),
 * after its `ready` event when it is connecting (an ioredis client with `enableOfflineQueue: false`
 * refuses every command until then), and rejects after `timeoutMs`. Never rejects unhandled.
 */
export function whenReady(client: unknown, timeoutMs: number): Promise<void> {
  const c = client as {
    status?: unknown
    isOpen?: unknown
    isReady?: unknown
    once?: (event: string, listener: () => void) => unknown
    off?: (event: string, listener: () => void) => unknown
  }
  const connecting =
    (typeof c.status === 'string' && ['connecting', 'connect', 'reconnecting'].includes(c.status)) ||
    (c.isOpen === true && c.isReady === false)
  if (!connecting || typeof c.once !== 'function') return Promise.resolve()
  return new Promise((resolve, reject) => {
    const onReady = () => {
      clearTimeout(timer)
      resolve()
    }
    const timer = setTimeout(() => {
      c.off?.('ready', onReady)
      reject(new Error(`the client was not ready within ${timeoutMs} ms`))
    }, timeoutMs)
    c.once!('ready', onReady)
  })
}

/** Resolves when an ioredis connection that is already connecting is ready; rejects after `timeoutMs`. */
function readyWithin(sub: IoRedisSubscriber, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not ready within ${timeoutMs} ms`)), timeoutMs)
    sub.on('ready', () => {
      clearTimeout(timer)
      resolve()
    })
  })
}

/** What a pub/sub subscriber tells the table. */
export interface SubscriberEvents {
  /** A notice: a hint that the table may have changed. */
  message(): void
  /** The connection came back after a drop: notices may have been missed. */
  reconnected(): void
}

/** The parts of the clients used to subscribe; both libraries resubscribe by themselves on reconnect. */
interface IoRedisSubscriber {
  status: string
  connect(): Promise<void>
  subscribe(channel: string): Promise<unknown>
  on(event: string, listener: (...args: unknown[]) => void): unknown
  disconnect(): void
}
interface NodeRedisSubscriber {
  connect(): Promise<unknown>
  subscribe(channel: string, listener: (message: string, channel: string) => void): Promise<unknown>
  on(event: string, listener: (...args: unknown[]) => void): unknown
  destroy?(): void
  disconnect?(): Promise<void>
}

/**
 * Subscribes to `channel` on a duplicate of `client`: ioredis `duplicate()` then `subscribe` and the
 * `message` event; node-redis (4 to 6, client or cluster) `duplicate()`, `connect()`, `subscribe(channel,
 * listener)`. A `ready` after the first one means the connection came back.
 */
export async function subscribe(
  client: unknown,
  channel: string,
  timeoutMs: number,
  events: SubscriberEvents,
): Promise<Subscriber> {
  const c = client as { duplicate?: () => unknown; defineCommand?: unknown }
  if (typeof c.duplicate !== 'function') {
    throw new InvalidOptionError(
      'RedisLimitTable.client',
      client,
      'a client with duplicate() (ioredis or node-redis)',
    )
  }
  let ready = 0
  const onReady = () => {
    ready++
    if (ready > 1) events.reconnected()
  }
  if (typeof c.defineCommand === 'function') {
    const sub = c.duplicate() as IoRedisSubscriber
    sub.on('error', () => {})
    sub.on('ready', onReady)
    sub.on('message', (ch) => {
      if (ch === channel) events.message()
    })
    try {
      if (sub.status === 'wait') await sub.connect()
      else if (sub.status !== 'ready') await readyWithin(sub, timeoutMs)
      await sub.subscribe(channel)
    } catch (error) {
      sub.disconnect()
      throw error
    }
    if (ready === 0) ready = 1
    return { close: () => sub.disconnect() }
  }
  const sub = c.duplicate() as NodeRedisSubscriber
  const close = () => {
    if (typeof sub.destroy === 'function') sub.destroy()
    else sub.disconnect?.().catch(() => {})
  }
  sub.on('error', () => {})
  sub.on('ready', onReady)
  try {
    await sub.connect()
    await sub.subscribe(channel, () => events.message())
  } catch (error) {
    close()
    throw error
  }
  if (ready === 0) ready = 1
  return { close }
}
