// Bursar's version: what `bursar --version` prints, the MCP server and buyer announce, and the
// signed system.genesis and system.start entries record. One place, kept equal to package.json's
// by test/cli/version.test.ts.

export const version = "0.1.0";
