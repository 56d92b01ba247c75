/**
 * @module The headless Chromium the dashboard's browser suites drive (Debian's, at /usr/bin/chromium,
 * through playwright-core), and a page opened in it that records what it must never do: console errors,
 * CSP violations, uncaught errors, dialogs. Without Chromium a suite fails (it never skips): `bash dev.sh
 * setup` installs it.
 */
import { existsSync } from 'node:fs'
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core'

const CHROMIUM = '/usr/bin/chromium'
const CHROMIUM_FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

/** Starts Chromium on a new, empty profile (launch() makes one in a temp dir and removes it after). */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `Chromium is not at ${CHROMIUM}: the browser tests need Debian's Chromium (apt-get install -y chromium; ` +
        '`bash dev.sh setup` installs it).',
    )
  }
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS })
}

/** What a page did that it must not: console errors, CSP violations, uncaught errors, dialogs. */
export interface Watched {
  page: Page
  errors: string[]
  dialogs: string[]
}

/**
 * A new page in `context`, watched from before its own script runs. `before` runs on the page before it
 * is asked for anything (to set its clock, say).
 */
export async function watchedPage(
  context: BrowserContext,
  before?: (page: Page) => Promise<void>,
): Promise<Watched> {
  const page = await context.newPage()
  const errors: string[] = []
  const dialogs: string[] = []
  // Run before the page's own script, outside its CSP (an init script is the browser's, not the page's).
  await page.addInitScript(
    "document.addEventListener('securitypolicyviolation', (e) => " +
      "console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI))",
  )
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text())
  })
  page.on('pageerror', (e) => errors.push(`page error: ${e.message}`))
  page.on('dialog', (d) => {
    dialogs.push(d.message())
    void d.dismiss()
  })
  await before?.(page)
  return { page, errors, dialogs }
}
