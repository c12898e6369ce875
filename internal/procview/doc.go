// Package procview shows the MCP processes of a local OpenCode: which
// child process serves each configured local (stdio) server of each armed
// directory, when such a child exits, and which MCP processes of this
// user look orphaned or duplicated. OpenCode before about 1.15 never says
// that a stdio server died (its status stays "connected"), and no release
// says that it left one behind; the process table does.
//
// # Reading the process table
//
// A Table reads pid, parent, process group, real uid, zombie or not,
// start time, working directory and argv of a process, never its
// environment. System is this machine's table: /proc through
// github.com/prometheus/procfs (ProcFS reads a recorded tree the same
// way, for tests). A process's children come from
// /proc/PID/task/TID/children, every thread's (OpenCode's TUI starts its
// MCP servers from a Worker thread, so the main thread's list is empty
// there); a kernel without those lists (CONFIG_PROC_CHILDREN off) falls
// back to reading every /proc/PID/stat.
//
// The process view runs on Linux only. A macOS table and exit watcher
// are to be built when a Mac test can run them; until then System and
// NewExits fail there (Unavailable), doctor and status say so, and
// nothing is ever signalled.
//
// # What OpenCode's children look like (measured)
//
// On the real OpenCode 1.18.34 (opencode serve and the TUI, Linux,
// 2026-12-01; testdata/opencode-1.18.34 is such a tree, recorded, and
// test/e2e TestProcessViewOnRealOpenCode checks it on every run):
//
//   - Each local server is a direct child of the opencode process, in
//     its process group, not wrapped by a shell or by node: its argv is
//     exactly the configured command ("mcpserver" found through PATH
//     stays "mcpserver"; a relative "../mcpserver" stays so). A command
//     that is itself a shell (["sh", "-c", "..."]) makes sh the child,
//     and the server its grandchild: the sh serves it.
//   - Its working directory is the instance directory, or the configured
//     cwd: a relative cwd ("sub dir") resolved against the directory, an
//     absolute one as it is.
//   - Under serve the children are listed under the main thread, under
//     the TUI under its Worker thread: read every thread's list.
//   - A killed child is reaped within about 4 ms (a zombie for that
//     long). Connect on a connected server starts a new child and the old
//     one exits; a disconnect ends it.
//   - When OpenCode is SIGKILLed, its children are adopted by init (or
//     the nearest subreaper) and read EOF on stdin; test/mcpserver and
//     most servers exit then. One that does not is an orphan.
//   - A script command runs as its interpreter: ["npx", "-y", "x"] is
//     ["node", "/usr/bin/npx", "-y", "x"] by the time the kernel has read
//     its #! line. Matching allows up to two interpreter words in front
//     and compares the program by its last path element.
//   - A launcher (npx, uvx, a shell, docker) changes what the child
//     looks like, and may run the server below it: see Launchers.
//   - npm's opencode package is a node script that runs the native
//     binary as its child; the view follows that binary's children too.
//
// # Launchers
//
// Most local servers are started through a launcher, and OpenCode's
// child is the launcher: launchers.go holds, in one table, what each
// one looks like over its life (measured where it could run here). npx
// and npm exec retitle themselves ("npm exec PKG ARGS": cmdline becomes
// one word, which Table.Read returns as one word, and Display shows as
// ps does, secrets masked); env, uvx, pipx run and bash exec into
// another program under the same pid; a shell or uv may chdir. For each
// configured command the matcher derives every such form once, when
// servers are set; a process running a command as configured wins over
// one a launcher may exec into. A child read while its argv is about to
// change (an exec, npm's first title "npm") is read again on the next
// scans. LauncherOf names a command's launcher and says whether it
// exits with its server (not a shell running `node x; sleep 600`: then
// watch the server itself); ServerProcess walks from the launcher down
// to the process that runs the server, or says it runs in a container
// (docker, podman), invisible here.
//
// # The view
//
// NewView follows one OpenCode process; SetServers gives it the local
// servers of every armed directory; Scan lists what serves what. A scan reads
// OpenCode's stat and its threads' children lists, and only the
// processes it has not seen before; an absence from the list is
// confirmed by one stat. An idle scan reads 10 files whatever the number
// of children; the kernel's list itself costs 0.3 ms at 1,000 children
// and 12 ms at 10,000 (it is quadratic), so a caller that scans on a
// period stretches it to 1,000 times the last scan (scanPeriod) and stays
// under 0.1 % of a core (BENCHMARKS.md). View.Run is that caller for the
// daemon: it scans, watches exits, writes the record, and tells its
// Handler (the engine) of each child's exit and start; View.Status is
// what status shows.
//
// Exits are not found by scans where they can be told: Exits watches
// each child through a pidfd (in one epoll set) and reports its exit within milliseconds; View.Exited
// takes that word before OpenCode has reaped the child, and
// View.Successor answers from a fresh scan whether OpenCode started the
// server again itself. Scans then only find new children. A pid that
// stays in the list between two scans is taken for the same process (a
// reuse would need the pid space to wrap within one period).
//
// Orphans reads the whole table (for doctor, on demand)
// and says of each process that looks left over what proves that an
// OpenCode now gone started it (the Record of sightings, a recorded
// process group, its OPENCODE_PID), or what is missing; Reaper.Reap ends
// only a proven orphan, and what runs below it, checking each process
// again right before each signal.
package procview
