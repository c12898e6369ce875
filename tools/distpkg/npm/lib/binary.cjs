// Where the mcp-reconnect binary of this machine is, for the command
// (bin/mcp-reconnect.cjs) and the OpenCode plugin (plugin/index.mjs):
// npm installed, beside this package, the one optional dependency whose
// "os" and "cpu" match this machine, @mcp-reconnect/OS-CPU, holding the
// release binary (nothing is downloaded at install or at run time).
"use strict"
const path = require("path")

const pkg = `@mcp-reconnect/${process.platform}-${process.arch}`

// binary returns the binary's path, or throws an Error that says what is
// missing and how to get it.
function binary() {
  try {
    return require.resolve(`${pkg}/bin/mcp-reconnect`)
  } catch {
    const built = Object.keys(require(path.join(__dirname, "..", "package.json")).optionalDependencies || {})
    throw new Error(
      built.includes(pkg)
        ? `${pkg}, which holds the binary for this machine, is not installed (were optional dependencies left out?); install mcp-reconnect again with them: npm install -g mcp-reconnect`
        : `no binary for ${process.platform} ${process.arch}; there is one for ${built.map((p) => p.replace("@mcp-reconnect/", "")).join(", ")}`,
    )
  }
}

module.exports = { binary }
