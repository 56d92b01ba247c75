import { Module } from '@nestjs/common'
import { MemoryStore, slidingWindow } from '@sluice/core'
import { SluiceModule } from '@sluice/nestjs'
import { AppController } from './app.controller.js'

@Module({
  imports: [
    // Every route: 100 a minute per client IP, each route counting on its own. A route's @RateLimit
    // options merge over these: its rules and key replace the module's, the store is the module's.
    SluiceModule.forRoot({
      store: new MemoryStore(),
      key: 'ip',
      rules: [slidingWindow({ limit: 100, windowMs: 60_000 })],
    }),
  ],
  controllers: [AppController],
})
export class AppModule {}
