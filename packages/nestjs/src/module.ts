/**
 * @module SluiceModule: `forRoot` parses the app's options at once (an invalid one throws there, naming
 * `SluiceModule.forRoot.<option>`), `forRootAsync` when the app initializes. Either way the module is
 * global, so `SluiceGuard` can be named in `@UseGuards` anywhere, and registers the guard as `APP_GUARD`
 * unless `global: false`.
 */

import { type DynamicModule, Module, type Provider } from '@nestjs/common'
import { APP_GUARD, DiscoveryModule } from '@nestjs/core'
import { InvalidOptionError } from '@sluice/core'
import { type ParsedHttpOptions, parseHttpOptions } from '@sluice/core/http'
import { booleanOption, functionOption } from '@sluice/core/options'
import { SluiceGuard } from './guard.ts'
import {
  MODULE_OWN_OPTIONS,
  type PlatformRequest,
  type PlatformResponse,
  ROUTE_OWN_OPTIONS,
  SLUICE_OPTIONS,
  type SluiceModuleAsyncOptions,
  type SluiceModuleOptions,
} from './options.ts'
import { SluiceLimits } from './route-limits.ts'

type Parsed = ParsedHttpOptions<PlatformRequest, PlatformResponse>

/** What `forRootAsync`'s factory may return: the module's options less `global`. */
const FACTORY_OWN_OPTIONS = Object.freeze({ ...ROUTE_OWN_OPTIONS, getRequestResponse: functionOption })

@Module({})
// biome-ignore lint/complexity/noStaticOnlyClass: a Nest module is a class; forRoot and forRootAsync are Nest's idiom.
export class SluiceModule {
  /**
   * The app's rate limits: the options every route inherits (`@RateLimit` on a controller or handler
   * merges over them). Throws `InvalidOptionError` for an invalid or unknown option.
   *
   * @example
   * ```ts
   * @Module({ imports: [SluiceModule.forRoot({ rules: ['slidingWindow:100/1m'], key: 'ip' })] })
   * class AppModule {}
   * ```
   */
  static forRoot(options: SluiceModuleOptions): DynamicModule {
    const parsed = parseHttpOptions<PlatformRequest, PlatformResponse>(
      'SluiceModule.forRoot',
      options,
      MODULE_OWN_OPTIONS,
    )
    return moduleOf({ provide: SLUICE_OPTIONS, useValue: parsed }, parsed.own.global !== false, [])
  }

  /**
   * As `forRoot`, with options a factory builds from injected providers (a configuration service). They
   * are checked when the app initializes: an invalid one fails its start, naming
   * `SluiceModule.forRootAsync.<option>`.
   */
  static forRootAsync(options: SluiceModuleAsyncOptions): DynamicModule {
    const where = 'SluiceModule.forRootAsync'
    if (options === null || typeof options !== 'object') {
      throw new InvalidOptionError(where, options, '{ useFactory, inject?, imports?, global? }')
    }
    functionOption(`${where}.useFactory`, options.useFactory)
    const global = options.global === undefined ? true : booleanOption(`${where}.global`, options.global)
    const useFactory = options.useFactory
    const provider: Provider = {
      provide: SLUICE_OPTIONS,
      inject: options.inject ?? [],
      useFactory: async (...args: unknown[]): Promise<Parsed> => {
        const parsed = parseHttpOptions<PlatformRequest, PlatformResponse>(
          where,
          await useFactory(...args),
          FACTORY_OWN_OPTIONS,
        )
        return { ...parsed, own: { ...parsed.own, global } }
      },
    }
    return moduleOf(provider, global, options.imports ?? [])
  }
}

function moduleOf(
  options: Provider,
  global: boolean,
  imports: NonNullable<SluiceModuleAsyncOptions['imports']>,
): DynamicModule {
  const providers: Provider[] = [options, SluiceLimits, SluiceGuard]
  if (global) providers.push({ provide: APP_GUARD, useClass: SluiceGuard })
  return {
    module: SluiceModule,
    global: true,
    imports: [DiscoveryModule, ...imports],
    providers,
    exports: [SluiceLimits, SluiceGuard],
  }
}
