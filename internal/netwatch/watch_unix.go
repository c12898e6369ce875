//go:build linux || darwin

package netwatch

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// watchSocket waits for the messages of a routing socket f and calls
// changed with each State that differs from the one before it (was), until
// ctx ends. A message only says "look again": read is the truth, since the
// kernel changes some things without a message (Linux drops the IPv4
// routes of an interface that loses its last address), and every message
// queued when a look starts is taken first, so a burst is one look.
// mayMatter skips messages that can change nothing.
//
// f is non-blocking, so it sits in Go's netpoller: a wait does not wake
// the process, and ctx ends it at once.
func watchSocket(ctx context.Context, f *os.File, mayMatter func([]byte) bool, read func() (State, error), changed func(was, is State)) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("netwatch: %w", err)
	}
	// A deadline in the past wakes a read parked in the netpoller.
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	last, err := read()
	if err != nil {
		return err
	}
	buf := make([]byte, 16<<10)
	for {
		var look bool
		var rerr error
		err := raw.Read(func(fd uintptr) bool {
			for {
				n, err := unix.Read(int(fd), buf)
				switch {
				case err == unix.EAGAIN:
					return look // nothing (more) queued: look, or wait
				case err == unix.ENOBUFS:
					look = true // messages were lost: look anyway
				case err != nil:
					rerr = err
					return true
				case mayMatter(buf[:n]):
					look = true
				}
			}
		})
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil || rerr != nil:
			return fmt.Errorf("netwatch: read %s: %w", f.Name(), cmp.Or(err, rerr))
		}
		now, err := read()
		if err != nil {
			continue // a failed look is no news; the next message retries
		}
		if !now.Equal(last) {
			was := last
			last = now
			changed(was, now)
		}
	}
}
