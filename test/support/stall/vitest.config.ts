// For test/support/watchdog.test.ts only: a run of the files here with the watchdog loaded.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    root: import.meta.dirname,
    include: ["*.stall.ts"],
    setupFiles: ["../watchdog.ts"],
    pool: "forks",
  },
});
