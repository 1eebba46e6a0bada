// Prints the plain closing line CI reads: "N passed, N failed" (and skipped), alone on a line.
// A test that did not run because its suite or file failed (a beforeAll that threw) counts as
// failed, not skipped: the line must not read "0 failed" for a run that failed.

import type { Reporter, TestCase, TestModule } from "vitest/node";

/** A test meant to run (not .skip or .todo) that did not, because a suite or file around it failed. */
function keptFromRunning(test: TestCase): boolean {
  if (test.options.mode === "skip" || test.options.mode === "todo") return false;
  for (let parent: TestCase["parent"] | undefined = test.parent; parent; parent = parent.type === "suite" ? parent.parent : undefined) {
    if (parent.state() === "failed") return true;
  }
  return false;
}

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") passed++;
        else if (state === "failed" || keptFromRunning(test)) failed++;
        else skipped++;
      }
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
