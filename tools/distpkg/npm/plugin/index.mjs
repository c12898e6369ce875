// The OpenCode plugin of mcp-reconnect: named once in OpenCode's config
// ("plugin" on 1.x, "plugins" on 2.x), it makes sure one daemon watches
// the OpenCode server it runs in. It starts `mcp-reconnect watch
// --opencode-pid PID` for its own process, detached, once per process
// (OpenCode loads it again for every directory), and never waits for it:
// the daemon finds the server (the URL a 1.x plugin is given, else the
// OpenCode 2 service file or the port of that process), refuses to be a
// second daemon for one server, and ends when this process ends. The
// plugin connects nothing, shows nothing in the TUI, and puts the
// password in the daemon's environment, never on its command line.
//
// 1.x calls server(input), with input.serverUrl (and setup too, as it
// calls every export: with no input.app, it does nothing); 2.x calls
// setup(input), with input.app.
import { spawn } from "node:child_process"
import fs from "node:fs"
import { createRequire } from "node:module"
import os from "node:os"
import path from "node:path"

const require = createRequire(import.meta.url)
const { binary } = require("../lib/binary.cjs")

// OpenCode may load this module more than once in one process (a module
// per directory); the daemon is started once.
const started = Symbol.for("mcp-reconnect.plugin.started")

function start(args, env) {
  if (globalThis[started]) return
  globalThis[started] = true
  let bin = "mcp-reconnect" // on PATH, when the package's own is missing
  try {
    bin = binary()
  } catch {}
  try {
    const child = spawn(bin, ["watch", "--opencode-pid", String(process.pid), ...args], { detached: true, stdio: "ignore", env })
    child.on("error", note)
    child.unref()
  } catch (err) {
    note(err)
  }
}

// note says why no daemon started, in the file the daemon would log to
// (never on OpenCode's screen).
function note(err) {
  const state = process.env.XDG_STATE_HOME || path.join(os.homedir(), ".local", "state")
  const line = `${new Date().toISOString()} mcp-reconnect OpenCode plugin: could not start mcp-reconnect (pid ${process.pid}): ${err.message}\n`
  fs.mkdir(path.join(state, "mcp-reconnect"), { recursive: true, mode: 0o700 }, () =>
    fs.appendFile(path.join(state, "mcp-reconnect", "mcp-reconnect.log"), line, { mode: 0o600 }, () => {}),
  )
}

// environ is OpenCode's environment for the daemon, with the server's
// password where watch reads it (OPENCODE_SERVER_PASSWORD) and no
// OPENCODE_URL: the daemon's server is this process's.
function environ(password) {
  const env = { ...process.env }
  delete env.OPENCODE_URL
  delete env.OPENCODE_PASSWORD
  if (password) env.OPENCODE_SERVER_PASSWORD = password
  else delete env.OPENCODE_SERVER_PASSWORD
  return env
}

// OpenCode 1.x: told its server's URL; the password is in its
// environment.
async function server(input) {
  if (input?.serverUrl) start(["--url", String(input.serverUrl)], environ(process.env.OPENCODE_SERVER_PASSWORD))
  return {}
}

// OpenCode 2.x: told no URL; it reads OPENCODE_PASSWORD first, then
// OPENCODE_SERVER_PASSWORD (its background service keeps its password
// in its service file, which the daemon reads).
async function setup(input) {
  if (input?.app) start([], environ(process.env.OPENCODE_PASSWORD || process.env.OPENCODE_SERVER_PASSWORD))
  return {}
}

// 1.x loads the package's "main", this module, and calls each of its
// exports as a plugin function (on 1.1.65 an export that is not one
// fails every directory's requests, measured; 1.14.48 skips it); 2.x loads the package's
// index.mjs, whose default is the {id, setup} definition it requires (a
// function there is ignored: 2.1.2, measured).
export default server
export { setup }
