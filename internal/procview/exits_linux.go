//go:build linux

package procview

import (
	"errors"
	"fmt"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// epollPoller waits for pidfds in one epoll set. An event's data holds
// the pid and the watch's seq (never the descriptor: a number closed by
// a replacing Add can be reused by it before Run reads the event).
// Data pid 0 is the eventfd.
type epollPoller struct {
	epfd, evfd int
	buf        []unix.EpollEvent
	evs        []pollEvent
}

func newPoller() (poller, error) {
	// A pidfd of this process, to learn whether this kernel (and its
	// seccomp filter) has pidfds that poll.
	probe, err := unix.PidfdOpen(os.Getpid(), 0)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		return nil, fmt.Errorf("procview: exits: pidfd_open: %w (%w)", errors.ErrUnsupported, err)
	}
	if err != nil {
		return nil, fmt.Errorf("procview: exits: pidfd_open: %w", err)
	}
	defer unix.Close(probe)
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("procview: exits: epoll_create1: %w", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("procview: exits: eventfd: %w", err)
	}
	p := &epollPoller{epfd: epfd, evfd: evfd, buf: make([]unix.EpollEvent, 128)}
	err = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &unix.EpollEvent{Events: unix.EPOLLIN})
	if err == nil {
		// EPERM: a pidfd that cannot be polled (no such kernel is
		// known, but then nothing would ever be reported).
		err = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, probe, &unix.EpollEvent{Events: unix.EPOLLIN})
		if errors.Is(err, unix.EPERM) {
			err = fmt.Errorf("%w (%w)", errors.ErrUnsupported, err)
		}
		if err == nil {
			err = unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, probe, nil)
		}
	}
	if err != nil {
		p.close()
		return nil, fmt.Errorf("procview: exits: epoll_ctl: %w", err)
	}
	return p, nil
}

func (p *epollPoller) watch(pid int, seq uint32) (int32, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return -1, errWatchGone
	}
	if err != nil {
		return -1, noRoom("pidfd_open", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(pid), Pad: int32(seq)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		return -1, noRoom("epoll_ctl", err)
	}
	return int32(fd), nil
}

func (p *epollPoller) unwatch(_ int, fd int32) {
	// Delete before closing: a child forked meanwhile (os/exec) holds
	// the pidfd until it execs, and the set would keep reporting it.
	_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
	_ = unix.Close(int(fd))
}

func (p *epollPoller) wait() ([]pollEvent, error) {
	n, err := unix.EpollWait(p.epfd, p.buf, -1)
	if errors.Is(err, unix.EINTR) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("procview: exits: epoll_wait: %w", err)
	}
	p.evs = p.evs[:0]
	for _, ev := range p.buf[:n] {
		if ev.Fd == 0 {
			var b [8]byte
			_, _ = unix.Read(p.evfd, b[:])
			continue
		}
		p.evs = append(p.evs, pollEvent{pid: int(ev.Fd), seq: uint32(ev.Pad)})
	}
	return p.evs, nil
}

func (p *epollPoller) wake() {
	b := [8]byte{1} // little-endian or big, it is not zero
	_, _ = unix.Write(p.evfd, b[:])
}

func (p *epollPoller) close() {
	_ = unix.Close(p.evfd)
	_ = unix.Close(p.epfd)
}

// watchLimit is how many processes Exits watches at most: three
// quarters of the soft RLIMIT_NOFILE (Go raised it to the hard limit at
// start), so that a quarter, at least 256, is left to everything else.
func watchLimit() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > math.MaxInt32 {
		return math.MaxInt32
	}
	reserve := max(rl.Cur/4, 256)
	if rl.Cur <= reserve {
		return 0
	}
	return int(rl.Cur - reserve)
}

// isNoRoom: no descriptor left (EMFILE for this process, ENFILE for the
// system), no kernel memory, or no epoll watch left
// (fs.epoll.max_user_watches, ENOSPC).
func isNoRoom(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) ||
		errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.ENOSPC)
}
