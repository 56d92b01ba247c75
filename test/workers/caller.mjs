/**
 * The call loop the store callers share (redis-caller.mjs, postgres-caller.mjs): each opens its store in
 * `open(setup)`, and this module runs the protocol and the calls.
 *
 * Protocol over IPC: the parent sends { setup }, the child answers { ready }; the parent sends { go },
 * the child makes `calls` calls to one limiter with `inFlight` of them outstanding at a time and answers
 * { done, results }, where each result is [sentAtMs, allowed ? 1 : 0, waitMs, retryAfterMs, answeredAtMs].
 * `setup.rules` is a list of [kind, options], each read by `ruleFromSpec`.
 */
import { createLimiter, ruleFromSpec } from '@sluice/core'

/** Runs the protocol: `open(setup)` answers `{ store, close }` for the setup's store. */
export function serveCalls(open) {
  let limiter
  let setup
  let close = async () => {}

  async function prepare(s) {
    setup = s
    const opened = await open(s)
    close = opened.close
    limiter = createLimiter({
      rules: s.rules.map(([kind, options]) => ruleFromSpec({ kind, ...options })),
      store: opened.store,
      prefix: s.prefix,
      onStoreError: 'throw',
    })
  }

  async function go() {
    const results = []
    let next = 0
    async function lane() {
      while (next < setup.calls) {
        next++
        const sentAt = Date.now()
        const d = await limiter.consume(setup.key)
        results.push([sentAt, d.allowed ? 1 : 0, d.waitMs, d.retryAfterMs, Date.now()])
      }
    }
    await Promise.all(Array.from({ length: setup.inFlight }, lane))
    return results
  }

  process.on('message', (message) => {
    if (message.setup) {
      prepare(message.setup).then(
        () => process.send({ ready: true }),
        (error) => process.send({ error: String(error?.stack ?? error) }),
      )
    } else if (message.go) {
      go().then(
        async (results) => {
          await close()
          process.send({ done: true, results }, () => process.exit(0))
        },
        (error) => process.send({ error: String(error?.stack ?? error) }),
      )
    }
  })
}
