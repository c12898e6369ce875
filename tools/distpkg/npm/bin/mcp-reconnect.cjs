#!/usr/bin/env node
// The mcp-reconnect command of the npm package. It runs the binary npm
// installed beside this package (lib/binary.cjs finds it) with the
// same arguments, environment and standard streams (a TUI gets the
// terminal itself) and exits as it does: with its exit code, or killed by
// the same signal.
"use strict"
const { spawn, execFileSync } = require("child_process")
const fs = require("fs")
const os = require("os")
const { binary } = require("../lib/binary.cjs")

let bin
try {
  bin = binary()
} catch (err) {
  console.error(`mcp-reconnect: ${err.message}`)
  process.exit(1)
}

// A signal sent to this process goes on to the binary, once: SIGINT and
// SIGQUIT are not sent again when this process is its terminal's
// foreground job, as the kernel sent the key's signal to the binary
// already (a daemon would see two). `mcp-reconnect run` follows the same
// rule for its child.
let signalled = false
for (const sig of ["SIGTERM", "SIGHUP", "SIGINT", "SIGQUIT"]) {
  process.on(sig, () => {
    signalled = true
    if ((sig === "SIGINT" || sig === "SIGQUIT") && foreground()) return
    child.kill(sig)
  })
}

// npx runs this command through a shell, and passes a SIGTERM or SIGINT
// sent to npx on to that shell alone, which dies of it: the binary would
// run on with no one to stop it. The shell gone (this process's parent)
// stands for that signal, unless one reached this process too (Ctrl-C at
// the terminal reaches every process of the job).
if (process.env.npm_command === "exec") {
  const parent = process.ppid
  const watch = setInterval(() => {
    if (process.ppid === parent) return
    clearInterval(watch)
    if (!signalled) child.kill("SIGTERM")
  }, 200)
  watch.unref()
}

// The binary stays in this process group: keys typed at the terminal
// (Ctrl-C, Ctrl-\, Ctrl-Z) and window resizes reach it from the kernel
// as they would without this wrapper. (A signal caught above is handled
// once this script has run: the child is there by then.)
const child = spawn(bin, process.argv.slice(2), { stdio: "inherit" })
child.on("error", (err) => {
  console.error(`mcp-reconnect: ${err.message}`)
  process.exit(1)
})

child.on("exit", (code, signal) => {
  if (signal) {
    // Killed as the binary was: with no listener left, the signal's
    // default action applies.
    process.removeAllListeners(signal)
    process.kill(process.pid, signal)
  }
  // Reached for a signal this process ignores (SIGPIPE): the shell's code.
  process.exit(code ?? 128 + os.constants.signals[signal])
})

// foreground says whether this process is in the foreground process group
// of its controlling terminal (none: not).
function foreground() {
  try {
    let pgrp, tpgid
    if (process.platform === "linux") {
      // Fields 5 and 8 of stat(5), after the command name in parentheses.
      const f = fs.readFileSync("/proc/self/stat", "utf8")
      ;[, , pgrp, , , tpgid] = f.slice(f.lastIndexOf(")") + 2).split(" ")
    } else {
      ;[pgrp, tpgid] = execFileSync("ps", ["-o", "pgid=,tpgid=", "-p", String(process.pid)], { encoding: "utf8" }).trim().split(/\s+/)
    }
    return pgrp === tpgid
  } catch {
    return false
  }
}
