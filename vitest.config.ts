import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Tests that spawn processes or hammer one SQLite file run in separate forks.
    pool: "forks",
    reporters: process.env.CI ? ["default", "./test/support/summary-reporter.ts"] : ["default"],
  },
});
