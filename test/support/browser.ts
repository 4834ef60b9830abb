import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { AxeBuilder } from '@axe-core/playwright';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

const ROOT = new URL('../../', import.meta.url).pathname;
/** Screenshots of the console tests, kept by CI as artifacts (docs/console.md). */
export const SCREENSHOT_DIR = join(ROOT, 'test-artifacts', 'console');

/** Debian's chromium (`apt-get install chromium`, as .ci/run does), or CHROMIUM_PATH. */
export function chromiumPath(): string | undefined {
  const candidates = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'];
  return candidates.find((path): path is string => path !== undefined && path !== '' && existsSync(path));
}

export async function launchChromium(): Promise<Browser> {
  const executablePath = chromiumPath();
  if (!executablePath) throw new Error('no chromium: apt-get install -y chromium, or set CHROMIUM_PATH');
  // --no-sandbox: CI runs as root, where Chromium's sandbox will not start.
  return chromium.launch({ executablePath, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
}

export const DESKTOP = { width: 1280, height: 900 };
export const PHONE = { width: 390, height: 844 };

/** A context of its own (cookies apart), recording every Content-Security-Policy violation the page reports. */
export async function openPage(browser: Browser, cspViolations: string[]): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: DESKTOP });
  const page = await context.newPage();
  page.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) cspViolations.push(`${page.url()}: ${message.text()}`);
  });
  return { context, page };
}

/** The serious and critical WCAG A/AA violations axe finds on the page as it is now. */
export async function seriousAxeViolations(page: Page): Promise<string[]> {
  const results = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']).analyze();
  return results.violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map((violation) => `${violation.id} (${violation.impact}): ${violation.help} at ${violation.nodes.map((node) => node.target.join(' ')).join(', ')}`);
}

/** A full-page screenshot into test-artifacts/console/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
}

/**
 * The acceptance of one page at both widths: no serious axe violation at 1280 and 390 px, no
 * horizontal scroll of the page at 390 px (tables scroll in their own region), a screenshot of each.
 */
export async function checkPageAtBothWidths(page: Page, name: string): Promise<string[]> {
  const problems: string[] = [];
  for (const [label, viewport] of [['1280', DESKTOP], ['390', PHONE]] as const) {
    await page.setViewportSize(viewport);
    // Let layout (and the chart's ResizeObserver) settle at the new width.
    await page.waitForTimeout(150);
    problems.push(...(await seriousAxeViolations(page)).map((violation) => `${name} at ${label} px: ${violation}`));
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    if (overflow > 1) problems.push(`${name} at ${label} px: the page scrolls sideways by ${overflow} px`);
    await screenshot(page, `${name}-${label}`);
  }
  await page.setViewportSize(DESKTOP);
  return problems;
}
