// The Node.js release Bursar needs, checked by the executable before anything else is loaded.
// 20.19.0 is package.json's engines (>=20.19), the minimum of vite 8 (^20.19.0 || >=22.12.0), on
// which vitest runs the tests: no older Node is tested. On an older Node, a module using what it
// lacks (crypto.hash, Node 20.12; import.meta.dirname, 20.11) would fail with a stack naming
// neither Node nor the version needed.

export const node_version_min = "20.19.0";

/** The line to print when `version` (process.versions.node) is older than node_version_min; undefined when it will do. */
export function nodeTooOld(version: string): string | undefined {
  const have = version.split(".").map(Number);
  const need = node_version_min.split(".").map(Number);
  for (let part = 0; part < need.length; part++) {
    const [a, b] = [have[part] ?? 0, need[part] ?? 0];
    if (Number.isNaN(a) || a < b) return `bursar: Node.js ${version} is too old: bursar needs Node.js ${node_version_min} or later`;
    if (a > b) return undefined;
  }
  return undefined;
}
