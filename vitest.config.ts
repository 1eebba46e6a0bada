import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Tests that spawn processes or hammer one SQLite file run in separate forks.
    pool: "forks",
    // Ends a test process whose event loop stands still for 5 minutes, printing where.
    setupFiles: ["./test/support/watchdog.ts"],
    reporters: process.env.CI ? ["default", "./test/support/summary-reporter.ts"] : ["default"],
  },
});
