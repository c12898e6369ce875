package opencode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// ErrStaleService: a service.json describes a server that is not the one
// answering at its URL (another pid or version), or none answers there.
// Re-read the file later: the service rewrites it when it (re)starts.
var ErrStaleService = errors.New("service.json does not describe the running OpenCode service")

// maxServiceFile bounds what ReadServiceFile reads; the real file is about
// 200 bytes.
const maxServiceFile = 64 << 10

// ServiceFilePath is where OpenCode 2.x's per-user background service
// registers itself: ${XDG_STATE_HOME:-HOME/.local/state}/opencode/service.json,
// on macOS too (OpenCode uses the XDG layout there, never ~/Library). An
// empty XDG_STATE_HOME counts as unset, as in OpenCode. Pass os.Getenv and
// os.UserHomeDir's answer. It returns "" when neither XDG_STATE_HOME nor
// home is known.
func ServiceFilePath(getenv func(string) string, home string) string {
	state := getenv("XDG_STATE_HOME")
	if state == "" {
		if home == "" {
			return ""
		}
		state = path.Join(home, ".local", "state")
	}
	return path.Join(state, "opencode", "service.json")
}

// Service is what OpenCode 2.x's service.json says about the running
// background service. The password is held in memory only: it has no
// exported field, and String, GoString, LogValue and Format never print
// it, so a Service can be logged or printed as a whole.
type Service struct {
	// Path is the file it was read from.
	Path string
	// ID is the registration's id (may be empty).
	ID string
	// Version the service registered with (may be empty).
	Version string
	// URL to reach the service, with an unspecified host (0.0.0.0, ::)
	// replaced by loopback.
	URL string
	// PID of the service process.
	PID int

	// password is behind a pointer so that even a %+v of a struct that
	// holds a Service in an unexported field prints an address, not it.
	password *string
}

// Password is the service's password ("" when the file holds none).
func (s Service) Password() string {
	if s.password == nil {
		return ""
	}
	return *s.password
}

// HasPassword reports whether the file held a password.
func (s Service) HasPassword() bool { return s.password != nil && *s.password != "" }

// Options returns o with the service's password, for New, NewV2 or Detect.
func (s Service) Options(o Options) Options {
	o.Password = s.Password()
	o.Username = ""
	return o
}

// String describes the service without its password.
func (s Service) String() string {
	pw := "none"
	if s.HasPassword() {
		pw = "set"
	}
	return fmt.Sprintf("opencode service %s (version %s, pid %d, password %s, from %s)", s.URL, s.Version, s.PID, pw, s.Path)
}

// GoString is String: %#v must not print the password either.
func (s Service) GoString() string { return s.String() }

// Format prints String for every verb, so no verb or flag reaches the
// password.
func (s Service) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// LogValue logs the service without its password.
func (s Service) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("url", s.URL),
		slog.String("version", s.Version),
		slog.Int("pid", s.PID),
		slog.Bool("password", s.HasPassword()),
		slog.String("path", s.Path),
	)
}

// Same reports whether two reads describe the same registration (URL, pid,
// version, id and password): when not, the service restarted and every
// client built from the old one must be replaced.
func (s Service) Same(o Service) bool {
	return s.URL == o.URL && s.PID == o.PID && s.Version == o.Version && s.ID == o.ID && s.Password() == o.Password()
}

// ReadServiceFile reads and checks one service.json. A missing file gives
// an error matching fs.ErrNotExist (no service registered). Error messages
// never quote the file's contents, which hold the password.
func ReadServiceFile(file string) (Service, error) {
	f, err := os.Open(file)
	if err != nil {
		return Service{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxServiceFile+1))
	if err != nil {
		return Service{}, fmt.Errorf("reading %s: %w", file, err)
	}
	if len(b) > maxServiceFile {
		return Service{}, fmt.Errorf("%s is larger than 64 KiB: not an OpenCode service.json", file)
	}
	return ParseServiceFile(file, b)
}

// ParseServiceFile decodes the contents b of the service.json at file:
// {"id","version","url","pid","password"}, url and a positive integer pid
// required. An unspecified listen host (0.0.0.0, ::) becomes loopback.
func ParseServiceFile(file string, b []byte) (Service, error) {
	var raw struct {
		ID       json.RawMessage `json:"id"`
		Version  json.RawMessage `json:"version"`
		URL      json.RawMessage `json:"url"`
		PID      json.RawMessage `json:"pid"`
		Password json.RawMessage `json:"password"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		// The decoder's message can quote a character of the file: give
		// only where it failed.
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return Service{}, fmt.Errorf("%s is not valid JSON (at byte %d)", file, se.Offset)
		}
		return Service{}, fmt.Errorf("%s is not a JSON object", file)
	}
	s := Service{Path: file}
	str := func(name string, m json.RawMessage, dst *string) error {
		if len(m) == 0 || string(m) == "null" || json.Unmarshal(m, dst) == nil {
			return nil
		}
		return fmt.Errorf("%s: %q is not a string", file, name)
	}
	var pw string
	for _, err := range []error{
		str("id", raw.ID, &s.ID), str("version", raw.Version, &s.Version),
		str("url", raw.URL, &s.URL), str("password", raw.Password, &pw),
	} {
		if err != nil {
			return Service{}, err
		}
	}
	if len(raw.Password) > 0 && string(raw.Password) != "null" {
		s.password = &pw
	}
	var pid int64
	if json.Unmarshal(raw.PID, &pid) != nil || pid <= 0 || int64(int(pid)) != pid {
		return Service{}, fmt.Errorf("%s: \"pid\" is not a positive integer", file)
	}
	s.PID = int(pid)
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		// Not quoted: a file written wrongly may hold the password there.
		return Service{}, fmt.Errorf("%s: \"url\" is not http://host:port", file)
	}
	// The service may listen on every interface; it is reached locally.
	switch h := u.Hostname(); h {
	case "0.0.0.0", "":
		u.Host = net.JoinHostPort("127.0.0.1", u.Port())
	case "::", "0:0:0:0:0:0:0:0":
		u.Host = net.JoinHostPort("::1", u.Port())
	}
	if u.Port() == "" {
		u.Host = strings.TrimSuffix(u.Host, ":")
	}
	s.URL = u.String()
	return s, nil
}

// Verify checks that s describes the server answering at s.URL: it must
// answer as OpenCode 2 (Detect: /api/info, or the routes older builds
// answer) with s's pid (and s's version, when the file names one), as
// OpenCode's own clients require. A stale file gives an error matching
// ErrStaleService; a refused password one matching ErrUnauthorized; an
// unreachable URL one matching ErrUnavailable. o supplies the transport
// and timeouts; its credentials are replaced by s's.
func (s Service) Verify(ctx context.Context, o Options) (Info, error) {
	gen, version, pid, err := Detect(ctx, s.URL, s.Options(o))
	if err != nil {
		return Info{}, err
	}
	info := Info{Version: version, PID: pid}
	if gen != V2 || pid != s.PID || s.Version != "" && version != s.Version {
		return info, fmt.Errorf("%w: %s registers pid %d version %q, but %s answers as OpenCode %s, pid %d, version %q",
			ErrStaleService, s.Path, s.PID, s.Version, s.URL, gen, pid, version)
	}
	return info, nil
}

// Registration is one OpenCode 2 service file in the state directory: a
// service that started wrote it (and removes it at a clean exit).
type Registration struct {
	// Path of the file.
	Path string
	// ModTime is when it was last written: when its service started.
	ModTime time.Time
	// Size in bytes.
	Size int64
}

// Same reports whether r and o are one file as it was: a service that
// starts again rewrites its file (a new pid, port or password), so an
// unchanged file registers the same, possibly stale, service.
func (r Registration) Same(o Registration) bool {
	return r.Path == o.Path && r.ModTime.Equal(o.ModTime) && r.Size == o.Size
}

// Registrations lists the OpenCode 2 service files in the directory of
// file (a service.json), with one ReadDir and no other request: file
// itself first, when it exists, then, with channels, the other release
// channels' files, the most recently written first. OpenCode 2 names the
// file by its release channel: service.json for latest, service-local.json
// for a local build, service-<hash of the channel>.json for any other
// (beta; the v2 preview's service-a1047eab….json). Its temporary files
// (service….json.<id>.tmp) do not end in .json and are not listed. A
// missing directory lists nothing.
func Registrations(file string, channels bool) ([]Registration, error) {
	dir, base := filepath.Dir(file), filepath.Base(file)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var first, others []Registration
	for _, de := range ents {
		name := de.Name()
		mine := name == base
		if !mine && (!channels || !strings.HasPrefix(name, "service-") || !strings.HasSuffix(name, ".json")) {
			continue
		}
		p := filepath.Join(dir, name)
		fi, err := de.Info()
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			fi, err = os.Stat(p) // OpenCode reads through a symlink too
		}
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		r := Registration{Path: p, ModTime: fi.ModTime(), Size: fi.Size()}
		if mine {
			first = append(first, r)
		} else {
			others = append(others, r)
		}
	}
	sort.SliceStable(others, func(i, j int) bool { return others[i].ModTime.After(others[j].ModTime) })
	return append(first, others...), nil
}
