//go:build darwin

package procview

import (
	"errors"
	"fmt"
	"math"

	"golang.org/x/sys/unix"
)

// kqueuePoller waits for NOTE_EXIT notes in one kqueue. Never run: there
// is no Mac here (it compiles and vets). A note is keyed by pid alone
// and carries no seq, so an exit the kernel returned just before a
// replacing Add of the same pid with a new birth would be taken for
// the new process's; that needs the pid reused within those
// microseconds, and macOS hands pids out in order up to 99,999.
type kqueuePoller struct {
	kq  int
	buf []unix.Kevent_t
	evs []pollEvent
}

// wakeIdent is the EVFILT_USER note that wakes wait.
const wakeIdent = 0

func newPoller() (poller, error) {
	kq, err := unix.Kqueue()
	if err != nil {
		return nil, fmt.Errorf("procview: exits: kqueue: %w", err)
	}
	unix.CloseOnExec(kq)
	p := &kqueuePoller{kq: kq, buf: make([]unix.Kevent_t, 128)}
	if err := p.change(wakeIdent, unix.EVFILT_USER, unix.EV_ADD|unix.EV_CLEAR, 0); err != nil {
		p.close()
		return nil, fmt.Errorf("procview: exits: kevent: %w", err)
	}
	return p, nil
}

// change applies one change; with no event list, kevent returns its
// error itself.
func (p *kqueuePoller) change(ident uint64, filter int16, flags uint16, fflags uint32) error {
	ch := []unix.Kevent_t{{Ident: ident, Filter: filter, Flags: flags, Fflags: fflags}}
	for {
		_, err := unix.Kevent(p.kq, ch, nil, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

func (p *kqueuePoller) watch(pid int, _ uint32) (int32, error) {
	err := p.change(uint64(pid), unix.EVFILT_PROC, unix.EV_ADD|unix.EV_ONESHOT, unix.NOTE_EXIT)
	if errors.Is(err, unix.ESRCH) {
		return -1, errWatchGone
	}
	if err != nil {
		return -1, noRoom("kevent", err)
	}
	return -1, nil
}

func (p *kqueuePoller) unwatch(pid int, _ int32) {
	// ENOENT once the note has fired (EV_ONESHOT deleted it).
	_ = p.change(uint64(pid), unix.EVFILT_PROC, unix.EV_DELETE, 0)
}

func (p *kqueuePoller) wait() ([]pollEvent, error) {
	n, err := unix.Kevent(p.kq, nil, p.buf, nil)
	if errors.Is(err, unix.EINTR) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("procview: exits: kevent: %w", err)
	}
	p.evs = p.evs[:0]
	for _, ev := range p.buf[:n] {
		if ev.Filter == unix.EVFILT_PROC && ev.Fflags&unix.NOTE_EXIT != 0 {
			p.evs = append(p.evs, pollEvent{pid: int(ev.Ident), anySeq: true})
		}
	}
	return p.evs, nil
}

func (p *kqueuePoller) wake() {
	_ = p.change(wakeIdent, unix.EVFILT_USER, 0, unix.NOTE_TRIGGER)
}

func (p *kqueuePoller) close() { _ = unix.Close(p.kq) }

// watchLimit: a note is kernel memory, not a descriptor.
func watchLimit() int { return math.MaxInt }

// isNoRoom: no memory for the note, or (for the Stat that verifies a
// new watch) no descriptor left.
func isNoRoom(err error) bool {
	return errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)
}
