/**
 * @module The one seam between sluice and a Redis client: run a Lua script on keys and arguments, or send
 * one command. The store, the limit table and @sluice/metrics' `publishStats` all reach Redis through it.
 * (Over 400 lines, not split: one class per client library, each small, behind the one interface here.)
 *
 * Implementations, picked by looking at the client (no client library is imported: all are optional peers,
 * and only their public methods are used):
 * - ioredis or iovalkey (`Redis` or `Cluster`): scripts by its `evalsha` command; commands through `call`.
 * - node-redis (client or cluster) and Valkey GLIDE (`GlideClient` or `GlideClusterClient`): EVALSHA.
 * Each resends a script as EVAL (which also reloads it) only when Redis answers NOSCRIPT; any other error
 * goes to the caller untouched. A cluster routes each call by its first key.
 */
import { createHash } from 'node:crypto'
import { ErrorCode, InvalidOptionError, StoreError } from '@sluice/core'

/**
 * A Redis client sluice can use: an ioredis or iovalkey `Redis` or `Cluster`, a node-redis client
 * (`createClient`) or cluster (`createCluster`), or a Valkey GLIDE `GlideClient` or `GlideClusterClient`.
 * sluice never connects, quits or reconfigures it.
 */
export type RedisClientLike =
  | { defineCommand(name: string, definition: { lua: string }): unknown; readonly status: string }
  | { sendCommand(...args: never[]): unknown; readonly isReady: boolean }
  | { sendCommand(...args: never[]): unknown; getSlotMaster(slot: never): unknown }
  | { customCommand(...args: never[]): unknown; invokeScript(...args: never[]): unknown }

/** A Lua script and its SHA1, as Redis names it in its script cache. */
export interface Script {
  readonly lua: string
  readonly sha: string
}

export function script(lua: string): Script {
  return { lua, sha: createHash('sha1').update(lua).digest('hex') }
}

/** One Redis client as sluice uses it. Every key of one call must hash to the same slot. */
export interface RedisConnection {
  /**
   * Resolves with the script's raw reply, or rejects with the client's error. `alone`: no other call
   * awaits a reply, so this one is sent at once rather than kept back to share a write with the next ones.
   */
  run(script: Script, keys: readonly string[], args: readonly string[], alone: boolean): Promise<unknown>
  /** Sends one command whose key is `key` (the cluster routes by it); `args` starts with the command's name. */
  command(key: string, args: readonly string[]): Promise<unknown>
  /** False when the client is known to be disconnected, so calls can fail fast instead of queueing. */
  connected(): boolean
  /** True for a cluster client: every key of one call must then hash to the same slot. */
  readonly cluster: boolean
  /**
   * A call failed or timed out. A runner whose client does not heal by itself repairs it here (a
   * node-redis cluster refreshes its slot map); the others ignore it.
   */
  troubled(): void
}

/** The parts of an ioredis `Redis` or `Cluster` the store uses. */
interface IoRedisLike {
  evalsha(sha: string, keys: number, ...rest: (readonly string[])[]): Promise<unknown>
  eval(lua: string, keys: number, ...rest: (readonly string[])[]): Promise<unknown>
  script(subcommand: 'LOAD', lua: string): Promise<unknown>
  call(...args: string[]): Promise<unknown>
  status: string
  /** True on a Cluster (ioredis and iovalkey set it on both classes). */
  isCluster?: boolean
  /** A standalone client's socket (a Cluster has one per node, and none here). */
  stream?: { cork?(): void; uncork?(): void }
}

/** The parts of a node-redis client the store uses. */
interface NodeRedisClientLike {
  sendCommand(args: string[]): Promise<unknown>
  readonly isReady: boolean
}

/** The parts of a node-redis cluster the store uses. */
interface NodeRedisClusterLike {
  sendCommand(firstKey: string, isReadonly: boolean, args: string[]): Promise<unknown>
  getSlotMaster(slot: number): unknown
  /** The masters it knows, each with its node client once connected (node-redis 5 and 6). */
  readonly masters?: readonly { readonly client?: { readonly isReady?: boolean } }[]
  /** Its slot map (node-redis 5 and 6): `rediscover` asks CLUSTER SLOTS again, from `startWith` first. */
  readonly _slots?: { rediscover(startWith: unknown): Promise<void> }
}

/** The parts of a Valkey GLIDE `GlideClient` or `GlideClusterClient` sluice uses. */
interface GlideLike {
  customCommand(
    args: string[],
    options?: { route?: { type: 'primarySlotKey'; key: string } },
  ): Promise<unknown>
  readonly isClosed?: boolean
}

/** The clients `connectionFor` accepts, as its error names them. */
export const ACCEPTED_CLIENTS =
  'an ioredis or iovalkey Redis or Cluster, a node-redis client or cluster (createClient / createCluster), ' +
  'or a Valkey GLIDE GlideClient or GlideClusterClient'

/** The connection for `client`, or throws `InvalidOptionError` naming `option`. */
export function connectionFor(client: unknown, option: string): RedisConnection {
  if (client !== null && typeof client === 'object') {
    const c = client as Record<string, unknown>
    if (typeof c.defineCommand === 'function' && typeof c.evalsha === 'function') {
      return new IoRedisRunner(client as IoRedisLike)
    }
    if (typeof c.customCommand === 'function' && typeof c.invokeScript === 'function') {
      // A GlideClusterClient, whose commands take a route, is told by a method only it has (not by its
      // class's name, which a bundler's minifier or a subclass changes).
      return new GlideRunner(client as GlideLike, typeof c.invokeScriptWithRoute === 'function')
    }
    if (typeof c.sendCommand === 'function' && typeof c.getSlotMaster === 'function') {
      return new NodeRedisClusterRunner(client as NodeRedisClusterLike)
    }
    if (typeof c.sendCommand === 'function' && 'isReady' in c) {
      return new NodeRedisClientRunner(client as NodeRedisClientLike)
    }
  }
  throw new InvalidOptionError(option, client, ACCEPTED_CLIENTS)
}

/**
 * Most calls a corked socket keeps back: then they go in one write, and the turn's later calls cork it again.
 * Kept back to the end of a turn, every call read from one chunk of replies leaves only once the whole chunk
 * has been read, while Redis, its queue drained, waits. With 64 calls in flight (bench/redis-time.mjs,
 * one run) slidingLog did 0.58x its raw script's rate kept back to the turn's end and 0.93x at 16, fixedWindow
 * 0.70x and 1.19x; at 256 in flight the rates stay, for about 1 us more client CPU per call.
 */
const WRITES_PER_FLUSH = 16

/** ioredis statuses in which a command would only wait in the offline queue for a reconnect. */
const IOREDIS_DOWN = new Set(['reconnecting', 'close', 'end'])

/**
 * ioredis and iovalkey. A script goes by the client's own `evalsha` command, which takes arrays and
 * flattens them one level, so the keys and arguments are not copied on the way. Not `defineCommand`: its
 * command makes a class per script, a promise and a closure more per call, and a call site that sees two
 * scripts (a concurrency consume and its releases) stops being one the engine can inline: a concurrency
 * request cost the client 80.0 k instructions that way, 60.9 k this way (fixedWindow: 59.1 k, 58.1 k;
 * bench/redis-client-instructions.mjs, one run each).
 */
class IoRedisRunner implements RedisConnection {
  readonly #client: IoRedisLike
  /** The scripts met so far (`loadFirst`). */
  readonly #loaded = new Set<string>()
  /**
   * The socket corked by the first call of an event-loop turn, until its writes are flushed (see
   * `#coalesceWrites`): the one uncorked, even if ioredis has put a new socket in its place meanwhile.
   */
  #corked: { uncork(): void } | undefined
  /** Calls written to the corked socket since it was corked: at `WRITES_PER_FLUSH` they go at once. */
  #written = 0
  /** Whether the end of this turn's `setImmediate` is set. */
  #flushing = false
  readonly cluster: boolean

  constructor(client: IoRedisLike) {
    this.#client = client
    this.cluster = client.isCluster === true
  }

  run(script: Script, keys: readonly string[], args: readonly string[], alone: boolean): Promise<unknown> {
    if (!this.#loaded.has(script.sha)) {
      loadFirst(this.#loaded, script, this.cluster, () => this.#client.script('LOAD', script.lua))
    }
    if (alone) return this.#send(script, keys, args)
    this.#coalesceWrites()
    const reply = this.#send(script, keys, args)
    if (++this.#written >= WRITES_PER_FLUSH) this.#flush()
    return reply
  }

  #send(script: Script, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    return this.#client.evalsha(script.sha, keys.length, keys, args).catch((error: unknown) => {
      if (!isNoScript(error)) throw error
      return this.#client.eval(script.lua, keys.length, keys, args)
    })
  }

  /**
   * Calls started close together leave in one socket write. ioredis writes each command to its socket at
   * once, and a write syscall costs more than the command itself. A busy server starts many calls per turn
   * of the event loop: one per request read in that turn, or per reply that arrived in one chunk. So the
   * first call corks the socket, and `setImmediate` uncorks it once the turn's I/O callbacks and their
   * promise continuations have run, or sooner, at `WRITES_PER_FLUSH` calls: Node then flushes every
   * command written meanwhile in one writev. What is sent, its order and the replies are unchanged; the
   * wait is at most the rest of one loop turn, and no more than `WRITES_PER_FLUSH` - 1 calls long.
   * A call with none other in flight (an idle client) is not kept back: nothing is coalesced while the client is
   * idle, and the wait would be all latency. A Cluster has a socket per node and is left as it is.
   */
  #coalesceWrites(): void {
    if (this.#corked !== undefined) return
    const stream = this.#client.stream
    if (typeof stream?.cork !== 'function' || typeof stream.uncork !== 'function') return
    stream.cork()
    this.#corked = stream as { uncork(): void }
    if (!this.#flushing) {
      this.#flushing = true
      setImmediate(this.#endOfTurn)
    }
  }

  /** Writes what the corked socket keeps back, if anything. */
  #flush(): void {
    this.#written = 0
    const corked = this.#corked
    if (corked === undefined) return
    this.#corked = undefined
    corked.uncork()
  }

  readonly #endOfTurn = (): void => {
    this.#flushing = false
    this.#flush()
  }

  command(_key: string, args: readonly string[]): Promise<unknown> {
    // `call` routes by the command's first key on a Cluster.
    return this.#client.call(...args)
  }

  connected(): boolean {
    return !IOREDIS_DOWN.has(this.#client.status)
  }

  /** ioredis refreshes a Cluster's slot map by itself when a node drops, and a client reconnects. */
  troubled(): void {}
}

/**
 * True for Redis's "NOSCRIPT No matching script" error reply (GLIDE words it "NoScriptError: No matching
 * script"), and nothing else.
 */
export function isNoScript(error: unknown): boolean {
  return (
    error instanceof Error &&
    (error.message.startsWith('NOSCRIPT ') || error.message.includes('NoScriptError: No matching script'))
  )
}

/**
 * Marks `script` met, and loads it on a standalone client just before its first call there, on the same
 * connection, so the calls of a fresh process do not all come back NOSCRIPT and go again with the whole
 * script. Not on a cluster, where a load reaches one node of many: there a node that lacks the script
 * answers NOSCRIPT and the call goes again as EVAL. A failed load shows in the call that follows, not here.
 */
function loadFirst(
  loaded: Set<string>,
  script: Script,
  cluster: boolean,
  load: () => Promise<unknown>,
): void {
  loaded.add(script.sha)
  if (!cluster) load().catch(() => {})
}

/** EVALSHA, then EVAL when the server has lost the script (a restart, a failover, SCRIPT FLUSH). */
abstract class EvalshaRunner implements RedisConnection {
  protected abstract send(firstKey: string, command: string[]): Promise<unknown>
  abstract connected(): boolean
  abstract troubled(): void
  abstract readonly cluster: boolean
  /** The scripts met so far (`loadFirst`). */
  readonly #loaded = new Set<string>()

  run(script: Script, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    if (!this.#loaded.has(script.sha)) {
      loadFirst(this.#loaded, script, this.cluster, () => this.send(keys[0]!, ['SCRIPT', 'LOAD', script.lua]))
    }
    const command = new Array<string>(3 + keys.length + args.length)
    command[0] = 'EVALSHA'
    command[1] = script.sha
    command[2] = String(keys.length)
    let i = 3
    for (const key of keys) command[i++] = key
    for (const arg of args) command[i++] = arg
    const firstKey = keys[0]!
    return this.send(firstKey, command).catch((error: unknown) => {
      if (!isNoScript(error)) throw error
      const retry = command.slice()
      retry[0] = 'EVAL'
      retry[1] = script.lua
      return this.send(firstKey, retry)
    })
  }

  command(key: string, args: readonly string[]): Promise<unknown> {
    return this.send(key, args as string[])
  }
}

class NodeRedisClientRunner extends EvalshaRunner {
  readonly #client: NodeRedisClientLike
  readonly cluster = false
  constructor(client: NodeRedisClientLike) {
    super()
    this.#client = client
  }
  protected send(_firstKey: string, command: string[]): Promise<unknown> {
    return this.#client.sendCommand(command)
  }
  connected(): boolean {
    return this.#client.isReady
  }

  /** A client reconnects by itself. */
  troubled(): void {}
}

/** Least time between two slot-map refreshes a cluster's failures ask for. */
export const REDISCOVER_EVERY_MS = 500

class NodeRedisClusterRunner extends EvalshaRunner {
  readonly #cluster: NodeRedisClusterLike
  /** When the last refresh was asked for (`performance.now()`), or -Infinity. */
  #rediscoveredAt = Number.NEGATIVE_INFINITY
  #rediscovering = false
  readonly cluster = true

  constructor(cluster: NodeRedisClusterLike) {
    super()
    this.#cluster = cluster
  }
  protected send(firstKey: string, command: string[]): Promise<unknown> {
    // The first key routes the command to the master of its slot (and follows MOVED / ASK).
    return this.#cluster.sendCommand(firstKey, false, command)
  }
  connected(): boolean {
    return true
  }

  /**
   * A node-redis 5 cluster refreshes its slot map only on a MOVED or ASK reply. When a master dies, the
   * calls for its slots wait on a node client that reconnects to the dead address for ever, so nothing
   * ever answers MOVED and the shard fails until the old master comes back. So a failure asks the cluster
   * to ask CLUSTER SLOTS again: from a master that is up (a dead one fails fast, and node-redis then asks
   * its root nodes), at most once per `REDISCOVER_EVERY_MS` and one at a time. Once the replica is
   * promoted, the next refresh maps the shard to it, and the dead node's client is dropped (its waiting
   * calls fail). node-redis 6 also refreshes by itself when a node keeps reconnecting; this is harmless
   * there. A refresh that fails is left for the next failure to retry.
   */
  troubled(): void {
    const slots = this.#cluster._slots
    if (this.#rediscovering || typeof slots?.rediscover !== 'function') return
    const now = performance.now()
    if (now - this.#rediscoveredAt < REDISCOVER_EVERY_MS) return
    const masters = this.#cluster.masters ?? []
    const startWith = (masters.find((m) => m.client?.isReady === true) ?? masters.find((m) => m.client))
      ?.client
    if (startWith === undefined) return
    this.#rediscoveredAt = now
    this.#rediscovering = true
    let refresh: Promise<void>
    try {
      refresh = slots.rediscover(startWith)
    } catch {
      refresh = Promise.resolve()
    }
    refresh
      .catch(() => {})
      .finally(() => {
        this.#rediscovering = false
      })
  }
}

/** Least time between two PINGs a GLIDE client is asked while it is taken as down. */
export const GLIDE_PING_EVERY_MS = 100

/**
 * Valkey GLIDE, standalone or cluster: `customCommand`, routed on a cluster to the primary of the first key's
 * slot. GLIDE reconnects by itself and refreshes a cluster's topology on its own.
 */
class GlideRunner extends EvalshaRunner {
  readonly #client: GlideLike
  readonly cluster: boolean
  /** A standalone client taken as down: a PING failed, and none has answered since (see `troubled`). */
  #down = false
  #pinging = false

  constructor(client: GlideLike, cluster: boolean) {
    super()
    this.#client = client
    this.cluster = cluster
  }
  protected send(firstKey: string, command: string[]): Promise<unknown> {
    return this.cluster
      ? this.#client.customCommand(command, { route: { type: 'primarySlotKey', key: firstKey } })
      : this.#client.customCommand(command)
  }
  connected(): boolean {
    return !this.#down && this.#client.isClosed !== true
  }

  /**
   * GLIDE says nothing of its connection: while Redis is away, each command waits for GLIDE's
   * `requestTimeout`, where the other clients, knowing they are disconnected, fail at once. So after a call
   * on a standalone client fails or times out, the client is asked a PING; when that fails too, it is taken
   * as down and calls fail at once, while PINGs go on (one at a time, at most every `GLIDE_PING_EVERY_MS`)
   * until one answers. A cluster client's calls go to each key's shard, and one shard's failure says
   * nothing of the others': it is not asked.
   */
  troubled(): void {
    if (this.cluster || this.#pinging) return
    this.#pinging = true
    let ping: Promise<unknown>
    try {
      ping = this.#client.customCommand(['PING'])
    } catch (error) {
      ping = Promise.reject(error)
    }
    ping.then(
      () => {
        this.#pinging = false
        this.#down = false
      },
      () => {
        this.#pinging = false
        this.#down = this.#client.isClosed !== true
        if (this.#down) setTimeout(() => this.troubled(), GLIDE_PING_EVERY_MS).unref()
      },
    )
  }
}

/**
 * What a failed Redis call rejects with, for the store and the limit table alike: a `StoreError` as it came,
 * anything else as a `STORE_ERROR` that keeps it as its cause.
 */
export function storeError(error: unknown): StoreError {
  if (error instanceof StoreError) return error
  const message = error instanceof Error ? error.message : String(error)
  return new StoreError(ErrorCode.STORE_ERROR, `Redis failed: ${message}`, { cause: error })
}
