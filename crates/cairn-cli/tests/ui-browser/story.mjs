// One story per page of cairn's web UI in Debian's Chromium, headless, driven by
// playwright-core; an axe-core scan of every page (no serious or critical violation); any
// console error (a CSP violation included) fails the run. Run by crates/cairn-cli/tests/
// ui_browser.rs, which seeds the brain and starts `cairn ui`; with SCREENSHOTS set, a picture
// of every page is saved there (docs/ui/ in the repository).
//
// Environment: LINK (the one-time sign-in link), URL (the server), RECORD (a seeded record's
// id), QUERY (words that find it), TITLE (its title), DREAM (a proposal set with a merge),
// SCREENSHOTS (optional directory).

import { chromium } from "playwright-core";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const url = env("URL");
const shots = process.env.SCREENSHOTS || "";
const problems = [];

function check(condition, message) {
  if (!condition) throw new Error(message);
}

async function axe(page, name) {
  // Evaluated through the DevTools protocol: not subject to the page's CSP.
  await page.evaluate(axeSource);
  const result = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const report = await axe.run(document, { resultTypes: ["violations"] });
    return report.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length }));
  });
  const bad = result.filter((v) => v.impact === "serious" || v.impact === "critical");
  for (const v of bad) problems.push(`${name}: axe ${v.impact} ${v.id} (${v.help}) on ${v.nodes} node(s)`);
  console.log(`axe ${name}: ${result.length} violation(s), ${bad.length} serious or critical`);
}

async function shot(page, name) {
  if (!shots) return;
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
  await page.setViewportSize({ width: 360, height: 780 });
  await page.screenshot({ path: join(shots, `${name}-narrow.png`), fullPage: false });
  await page.setViewportSize({ width: 1280, height: 860 });
}

const stories = {
  async search(page) {
    await page.goto(`${url}/`);
    await page.fill("#q", "");
    // Typed, not submitted: htmx runs the search after the debounce and swaps #results in.
    await page.locator("#q").pressSequentially(env("QUERY"), { delay: 20 });
    // Each keystroke may start a search; read the results only once the one for the whole
    // query has been swapped in (its URL pushed, no request left in flight).
    await page.waitForFunction(
      (q) => new URL(location.href).searchParams.get("q") === q,
      env("QUERY"),
      { timeout: 10000 },
    );
    await page.waitForLoadState("networkidle");
    const hit = page.locator("#results .result .title", { hasText: env("TITLE") });
    await hit.first().waitFor({ timeout: 10000 });
    const why = await page.locator("#results .result").first().locator("dl.why").innerText();
    check(/lexical rank/.test(why) && /#1/.test(why), `the first result says why: ${why}`);
    check(page.url().includes("q="), `the URL keeps the query: ${page.url()}`);
    await axe(page, "search");
    await shot(page, "search");
  },
  async record(page) {
    const id = env("RECORD");
    await page.goto(`${url}/ui/records/${id}`);
    await axe(page, "record");
    await shot(page, "record");
    await page.locator("details", { hasText: "Edit" }).locator("summary").click();
    const body = page.locator("#edit-body");
    const before = await body.inputValue();
    await body.fill(`${before} Edited in the browser.`);
    await page.locator("form[action$='/edit'] button[type=submit]").click();
    await page.waitForURL(new RegExp(`/ui/records/${id}#history`));
    const diff = await page.locator(".diff ins").allInnerTexts();
    check(diff.join(" ").includes("browser."), `the edit is in the history's diff: ${diff}`);
    const history = await page.locator("ol.history").innerText();
    check(/update/.test(history), `the history lists the update: ${history}`);
  },
  async tending(page) {
    await page.goto(`${url}/ui/tending`);
    await axe(page, "tending");
    await shot(page, "tending");
    await page.locator(`a[href="/ui/dreams/${env("DREAM")}"]`).click();
    await page.waitForURL(new RegExp(`/ui/dreams/${env("DREAM")}$`));
    const merge = page.locator("section[aria-label=merge] .diff");
    check(await merge.count() === 1, "the merge is shown as a diff");
    check(await merge.locator("ins, del").count() > 0, "the diff marks what differs");
    await axe(page, "dream");
    await shot(page, "dream");
    await page.locator("form[action$='/accept'] input[value=merge]").check();
    await page.locator("form[action$='/accept'] button[type=submit]").click();
    await page.waitForURL(new RegExp(`/ui/dreams/${env("DREAM")}$`));
    const outcome = await page.locator("section[aria-label=merge]").innerText();
    check(/applied/.test(outcome), `the merge is applied: ${outcome}`);
  },
  async graph(page) {
    await page.goto(`${url}/ui/graph?node=%23${env("RECORD")}&depth=2`);
    const nodes = page.locator("svg.graph .node");
    check(await nodes.count() >= 3, `the neighbourhood is drawn: ${await nodes.count()} nodes`);
    const svg = page.locator("svg.graph");
    const before = await svg.getAttribute("viewBox");
    await page.locator("button[data-zoom=in]").click();
    const zoomed = await svg.getAttribute("viewBox");
    check(zoomed !== before, `zoom changes the view: ${before} -> ${zoomed}`);
    const box = await svg.boundingBox();
    await page.mouse.move(box.x + 10, box.y + 10);
    await page.mouse.down();
    await page.mouse.move(box.x + 80, box.y + 60, { steps: 4 });
    await page.mouse.up();
    check(await svg.getAttribute("viewBox") !== zoomed, "dragging pans the view");
    await page.locator("button[data-zoom=reset]").click();
    await axe(page, "graph");
    await shot(page, "graph");
    // Clicking a node walks on from it.
    const other = page.locator("svg.graph .node.record").first();
    const href = await other.getAttribute("href");
    await other.click();
    await page.waitForURL((u) => u.href.endsWith(href));
    check(await page.locator("svg.graph .node").count() >= 2, "the walk goes on from the clicked node");
  },
  async tasks(page) {
    await page.goto(`${url}/ui/tasks`);
    const text = await page.locator("main").innerText();
    check(/Rotate the staging keys/.test(text), "the task is listed");
    check(await page.locator(".chart rect").count() === 4, "one bar per reading");
    await axe(page, "tasks");
    await shot(page, "tasks");
  },
  async timeline(page) {
    await page.goto(`${url}/ui/timeline`);
    const text = await page.locator("main").innerText();
    check(/update/.test(text), "the edit is on the timeline");
    // The edit was the owner's (`cairn ui`: actor `ui`), the seeding the CLI's.
    await page.selectOption("select[name=actor]", "ui");
    await page.locator("form[action='/ui/timeline'] button[type=submit]").click();
    await page.waitForURL(/actor=ui/);
    const mine = await page.locator("main").innerText();
    check(/by ui/.test(mine) && /update/.test(mine) && !/by cli/.test(mine), `only the owner's events: ${mine}`);
    await axe(page, "timeline");
    await shot(page, "timeline");
  },
  async health(page) {
    await page.goto(`${url}/ui/health`);
    check(await page.locator(".chart svg rect").count() > 0, "the growth chart has bars");
    await axe(page, "health");
    await page.locator("a[href^='/ui/health?sizes=1']").click();
    await page.waitForURL(/sizes=1/);
    check(await page.locator("table.sizes tbody tr").count() > 5, "the size of each table and index");
    await axe(page, "health with the size by table");
    await shot(page, "health");
  },
};

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox"],
});
let failed = false;
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`console error on ${page.url()}: ${message.text()}`);
  });
  page.on("pageerror", (error) => problems.push(`script error on ${page.url()}: ${error}`));
  await page.goto(env("LINK"));
  check(new URL(page.url()).pathname === "/", `the link signs in and lands on search: ${page.url()}`);
  const only = process.env.STORIES ? process.env.STORIES.split(",") : Object.keys(stories);
  for (const name of only) {
    try {
      await stories[name](page);
      console.log(`story ${name}: ok`);
    } catch (error) {
      failed = true;
      console.log(`story ${name}: FAILED: ${error.message}`);
    }
  }
  // The login page, signed out (its own scan and picture).
  const fresh = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const login = await fresh.newPage();
  await login.goto(`${url}/ui/login`);
  await axe(login, "login");
  await shot(login, "login");
} finally {
  await browser.close();
}
for (const problem of problems) console.log(`problem: ${problem}`);
if (failed || problems.length > 0) {
  console.log("browser stories: FAILED");
  process.exit(1);
}
console.log("browser stories: ok");
