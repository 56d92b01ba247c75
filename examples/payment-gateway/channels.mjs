/**
 * Stand-ins for the outside payment channels. Each call answers after `latencyMs` with a receipt, and
 * every call is remembered (when, for which bizType and channel), so one can see what the channels
 * were actually sent: never more than their limits.
 */
import { setTimeout as sleep } from 'node:timers/promises'

export function createChannels({ latencyMs = 30 } = {}) {
  /** `bizType:channel` -> times (ms since the epoch) at which the channel was called. */
  const calls = new Map()
  let sequence = 0
  return {
    async call({ bizType, channel }) {
      const key = `${bizType}:${channel}`
      const times = calls.get(key) ?? []
      times.push(Date.now())
      calls.set(key, times)
      await sleep(latencyMs)
      sequence += 1
      return { channelTxnId: `${channel}-${process.pid}-${sequence}`, status: 'SUCCESS' }
    },
    /** Calls received per `bizType:channel`, with their times. */
    stats() {
      return Object.fromEntries([...calls].map(([key, times]) => [key, { calls: times.length, times }]))
    },
  }
}
