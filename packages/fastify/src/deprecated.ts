/**
 * @module The plugin's former second and third names (`fastifySluice` and the default export), kept one
 * release: each is the plugin, warning once (code `SLUICE_DEP_FASTIFY_NAME`) when Fastify first registers it.
 * `sluice` is the one name.
 */
import type { FastifyInstance, FastifyPluginAsync } from 'fastify'
import type { SluicePluginOptions } from './options.ts'
import { sluice } from './register.ts'

const warned = new Set<string>()

/** `sluice` under an old name: the same plugin (fastify-plugin's marks copied), warning once when registered. */
function formerName(name: string): FastifyPluginAsync<SluicePluginOptions> {
  const plugin = async (instance: FastifyInstance, options: SluicePluginOptions) => {
    if (!warned.has(name)) {
      warned.add(name)
      process.emitWarning(
        `${name} from @sluice/fastify is deprecated: import { sluice } from '@sluice/fastify'.`,
        {
          type: 'DeprecationWarning',
          code: 'SLUICE_DEP_FASTIFY_NAME',
        },
      )
    }
    return sluice(instance, options)
  }
  // fastify-plugin's marks (no encapsulation, the plugin's name and Fastify range) go with it.
  for (const key of Reflect.ownKeys(sluice)) {
    if (key === 'length' || key === 'name' || key === 'prototype') continue
    Object.defineProperty(plugin, key, Object.getOwnPropertyDescriptor(sluice, key)!)
  }
  return plugin as FastifyPluginAsync<SluicePluginOptions>
}

/** @deprecated Use `sluice`: `import { sluice } from '@sluice/fastify'`. Removed next release. */
export const fastifySluice: FastifyPluginAsync<SluicePluginOptions> = formerName('fastifySluice')

/** @deprecated Use the named export `sluice`. Removed next release. */
export const defaultExport: FastifyPluginAsync<SluicePluginOptions> = formerName('The default export')
