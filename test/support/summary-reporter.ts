// Prints the plain closing line CI reads: "N passed, N failed" (and skipped), alone on a line,
// and a line as each file starts ("started test/…"): vitest names a file only once it ends, so
// without these a run that stalls would not say in which file.
// A test that did not run because its suite or file failed (a beforeAll that threw) counts as
// failed, not skipped, and so do a file that failed before it had tests and an error outside
// any test: the line must not read "0 failed" for a run that failed.

import { relative } from "node:path";
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
  onTestModuleStart(module: TestModule): void {
    process.stdout.write(`started ${relative(process.cwd(), module.moduleId)}\n`);
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    // An error outside any test, or a file that failed before it had tests (an import that threw), is one failure each.
    let failed = unhandledErrors.length;
    let skipped = 0;
    for (const module of testModules) {
      const tests = [...module.children.allTests()];
      if (tests.length === 0 && module.state() === "failed") failed++;
      for (const test of tests) {
        const state = test.result().state;
        if (state === "passed") passed++;
        else if (state === "failed" || keptFromRunning(test)) failed++;
        else skipped++;
      }
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
