/**
 * @module Script calls on one connection, as the store and the limit table make them: each within its
 * timeout (one timer for all, deadlines.ts), bounded in flight, refused at once while the client is known
 * to be down, and carrying its deadline in Redis's clock, learnt from the replies (`attempt`).
 */
import { ErrorCode, StoreError } from '@sluice/core'
import { type RedisConnection, type Script, storeError } from './client.ts'
import { Deadlines, type PendingCall } from './deadlines.ts'
import {
  type Call,
  isLate,
  periodMissOf,
  serverNowOf,
  unexpectedReply,
  withDeadline,
  writePeriods,
} from './wire.ts'

/**
 * Reads a script's reply. `late`: the call had already been answered by its timeout when the reply came,
 * yet the script ran (its reply is not `late`): what it counted, the caller gives back (a consume's units,
 * a fetch's batch); the value returned then goes nowhere.
 */
export type ReadReply<T> = (reply: unknown[], late: boolean) => T

export class ScriptCalls {
  readonly #connection: RedisConnection
  readonly #owner: string
  /** Longest wait for a call, in ms. */
  readonly timeoutMs: number
  readonly #maxInFlight: number
  readonly #deadlines: Deadlines
  #inFlight = 0
  /**
   * Redis's ms minus `performance.now()`, as low as the replies so far allow (see `#learnClock`); undefined
   * until the first reply. It turns a call's local timeout into the deadline its script is sent.
   */
  #offset: number | undefined
  /** Set when the owner closes: calls are refused from then on, but for those sent while closing. */
  closed = false

  /** `owner` names the user of these calls in errors (`RedisStore`). */
  constructor(connection: RedisConnection, owner: string, timeoutMs: number, maxInFlight: number) {
    this.#connection = connection
    this.#owner = owner
    this.timeoutMs = timeoutMs
    this.#maxInFlight = maxInFlight
    this.#deadlines = new Deadlines(timeoutMs, () => performance.now(), this.timeoutError)
  }

  /** Redis's ms now as these calls estimate it (see `#learnClock`); undefined until the first reply. */
  redisNow(): number | undefined {
    return this.#offset === undefined ? undefined : performance.now() + this.#offset
  }

  /** A call, waiting from now until its timeout. */
  start<T>(): PendingCall<T> {
    return this.#deadlines.start<T>()
  }

  /**
   * Sends one call's script with the deadline of `call` in Redis's ms: past it, the call has been answered
   * by its timeout, so a script that starts later counts nothing and answers `late`. A `late` answer
   * that arrives while the call is still waiting means the deadline was wrong (no reply had told the
   * calls Redis's clock yet, or that clock moved): the clock is learnt from that answer, and the call is
   * sent once more (`retry`), with a deadline from it. `done` reads the reply, also one that comes after the
   * call's timeout from a script that ran (see `ReadReply`). `lost` is told when the call ends without the
   * script having run, as far as can be known: with `late` true when Redis answered `late` and the call goes
   * no more (the script surely did nothing), false when the client failed the call (it may have run).
   *
   * A call carrying quota periods (`wire.periods`) whose script's now lay outside one of them (a stale
   * estimate of Redis's clock at a period's edge) is answered `{ 'period', now, serverNow }` and changed
   * nothing: it is sent once more with the periods holding that now. A second such answer (a period's edge
   * passed between the two) fails the call, `ERR_SLUICE_STORE`, having counted nothing.
   */
  attempt<T>(
    call: PendingCall<T>,
    s: Script,
    wire: Call,
    retry: boolean,
    done: ReadReply<T>,
    lost?: (late: boolean) => void,
  ): void {
    withDeadline(wire, this.#offset === undefined ? undefined : call.deadline + this.#offset)
    const sent = performance.now()
    this.send(s, wire.keys, wire.args).then(
      (reply) => {
        this.#inFlight--
        const serverNow = serverNowOf(reply)
        if (serverNow !== undefined) this.#learnClock(serverNow, sent, performance.now())
        if (call.done) {
          // Answered by its timeout meanwhile: a script that ran anyway has what it counted given back.
          if (isLate(reply) || missed(reply)) lost?.(true)
          else if (serverNow !== undefined) {
            try {
              done(reply as unknown[], true)
            } catch {}
          }
          return
        }
        if (isLate(reply)) {
          const refused = retry ? this.refuse() : this.timeoutError()
          if (refused === undefined) this.attempt(call, s, wire, false, done, lost)
          else {
            call.reject(refused)
            lost?.(true)
          }
          return
        }
        let outside: number | undefined
        try {
          outside = periodMissOf(reply)
        } catch (error) {
          call.reject(error)
          return
        }
        if (outside !== undefined) {
          const refused = wire.periods === undefined ? periodsMissed() : this.refuse(true)
          if (refused === undefined) {
            writePeriods(wire, outside)
            this.attempt(call, s, { ...wire, periods: undefined }, retry, done, lost)
          } else {
            call.reject(refused)
            lost?.(true)
          }
          return
        }
        let answer: T
        try {
          if (serverNow === undefined) throw unexpectedReply()
          answer = done(reply as unknown[], false)
        } catch (error) {
          call.reject(error)
          return
        }
        call.resolve(answer)
      },
      (error: unknown) => {
        this.#inFlight--
        this.#connection.troubled()
        call.reject(storeError(error))
        lost?.(false)
      },
    )
  }

  /**
   * Learns Redis's clock from a reply: Redis read `serverNow` (whole ms) between `sent` and `received`, so
   * its offset from the local clock lies in [serverNow - received, serverNow + 1 - sent]. These calls keep
   * the highest lower bound seen, which errs early: a deadline from it falls before the call's timeout
   * by about the time a reply takes to come back, so a call counted just before its deadline is still
   * answered by Redis rather than by the timeout. A reply whose range lies wholly below the kept
   * bound means Redis's clock went back (or a cluster node's clock runs behind): the bound restarts there.
   */
  #learnClock(serverNow: number, sent: number, received: number): void {
    const lower = serverNow - received
    if (this.#offset === undefined || this.#offset > serverNow + 1 - sent || lower > this.#offset) {
      this.#offset = lower
    }
  }

  /** Why a call cannot be sent now (`closing`: a batch's return, which goes out even while the store closes). */
  refuse(closing = false): StoreError | undefined {
    if (this.closed && !closing) return new StoreError(ErrorCode.STORE_ERROR, `The ${this.#owner} is closed.`)
    if (this.#inFlight >= this.#maxInFlight) {
      return new StoreError(
        ErrorCode.STORE_ERROR,
        `Redis has ${this.#inFlight} calls unanswered (maxInFlight ${this.#maxInFlight}); not sending more.`,
      )
    }
    if (!this.#connection.connected()) {
      return new StoreError(ErrorCode.STORE_ERROR, 'The Redis client is not connected.')
    }
    return undefined
  }

  /** Sends a script call, counted in flight until the client settles it. */
  send(s: Script, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    this.#inFlight++
    try {
      return this.#connection.run(s, keys, args, this.#inFlight === 1)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  readonly timeoutError = (): StoreError => {
    this.#connection.troubled()
    return new StoreError(ErrorCode.STORE_TIMEOUT, `Redis did not answer within ${this.timeoutMs} ms.`)
  }

  /** Sends a script whose reply is not read (a reset): settles `call` when the client does. */
  sendPlain(call: PendingCall<void>, s: Script, keys: readonly string[]): void {
    this.send(s, keys, []).then(
      () => {
        this.#inFlight--
        call.resolve()
      },
      (error: unknown) => {
        this.#inFlight--
        call.reject(storeError(error))
      },
    )
  }
}

/** Whether a reply says the script's now lay outside a period the call carried (a malformed one says no). */
function missed(reply: unknown): boolean {
  try {
    return periodMissOf(reply) !== undefined
  } catch {
    return false
  }
}

function periodsMissed(): StoreError {
  return new StoreError(
    ErrorCode.STORE_ERROR,
    "Redis's clock lay outside the quota period the call was sent for, twice (a period's edge passed between the two); nothing was counted.",
  )
}
