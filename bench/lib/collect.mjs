/**
 * @module A full collection before a case's counted calls (run with `--expose-gc`), for the cases that
 * callgrind counts (cases/calls.mjs, cases/redis-calls.mjs).
 */
import { setTimeout as sleep } from 'node:timers/promises'

/**
 * Collects the heap, then waits idle while the collector's helper threads sweep what it freed. Swept later,
 * that work could land among the counted calls: all of it in one run and none in another (up to 240
 * instructions a call for sluice's 100,000 keys). A steady state of calls makes no full collection of its
 * own (a million calls of sluice's fixed window on 100,000 keys made none), so the sweep is the forced
 * collection's alone and belongs to no call. Two seconds are ample under callgrind's slowdown, with other
 * counts running beside.
 */
export async function collected() {
  globalThis.gc?.()
  await sleep(2000)
}
