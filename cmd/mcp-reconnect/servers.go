package main

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"

	"github.com/spf13/pflag"

	"github.com/mcp-reconnect/mcp-reconnect/internal/daemon"
	"github.com/mcp-reconnect/mcp-reconnect/internal/loopback"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/private"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
)

// defaultURL is OpenCode 1.x's `serve` default.
const defaultURL = "http://127.0.0.1:4096"

// serversKey is the config file's array of tables listing OpenCode
// servers, each with its own credentials:
//
//	[[opencode]]
//	url = "http://127.0.0.1:4096"
//	password-file = "~/.config/mcp-reconnect/work.pw"
const serversKey = "opencode"

// serverEntry is one [[opencode]] table.
type serverEntry struct {
	URL          string   `toml:"url"`
	Username     string   `toml:"username"`
	PasswordFile string   `toml:"password-file"`
	Directory    []string `toml:"directory"`
}

// servers reads the [[opencode]] tables of the file (none for no file).
// Unknown keys are errors that name the file, the table and the key; a
// password itself is refused: it goes in a password file.
func (c *configFile) servers() ([]serverEntry, error) {
	if c == nil || c.data[serversKey] == nil {
		return nil, nil
	}
	path := c.path
	tables, ok := c.data[serversKey].([]map[string]any)
	if !ok {
		return nil, fmt.Errorf("config file %s: %s must be [[%s]] tables", path, serversKey, serversKey)
	}
	var out []serverEntry
	for i, raw := range tables {
		where := fmt.Sprintf("config file %s: [[opencode]] #%d", path, i+1)
		var e serverEntry
		strs := map[string]*string{"url": &e.URL, "username": &e.Username, "password-file": &e.PasswordFile}
		for k, v := range raw {
			switch p := strs[k]; {
			case p != nil:
				s, ok := v.(string)
				if !ok {
					return nil, fmt.Errorf("%s: key %q takes a string", where, k)
				}
				*p = s
			case k == "directory":
				list, ok := v.([]any)
				if !ok {
					list = []any{v}
				}
				for _, d := range list {
					s, ok := d.(string)
					if !ok {
						return nil, fmt.Errorf("%s: key %q takes strings", where, k)
					}
					e.Directory = append(e.Directory, s)
				}
			case k == "password":
				return nil, fmt.Errorf("%s: put the password in a file named by password-file (chmod 600), not in the config", where)
			default:
				return nil, fmt.Errorf("%s: unknown key %q (url, username, password-file, directory)", where, k)
			}
		}
		if e.URL == "" {
			return nil, fmt.Errorf("%s: url is missing", where)
		}
		if _, err := opencode.New(e.URL, opencode.Options{}); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// readPasswordFile reads a password from a file only this user can read
// and change (as ssh refuses a private key others can read, or that
// another user owns), trimming one trailing newline. The error never
// holds the password.
func readPasswordFile(path string) (string, error) {
	path, err := expandHome(path)
	if err != nil {
		return "", fmt.Errorf("password file %s: %w", path, err)
	}
	f, _, err := private.Trust{UID: -1, RootMayOwn: true}.Open("password file", path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return "", fmt.Errorf("password file %s: %w", path, err)
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if pw == "" {
		return "", fmt.Errorf("password file %s is empty", path)
	}
	return pw, nil
}

// passwordForNoServer refuses a password that would go to no server:
// with [[opencode]] tables (each has its own) and no --url, there is no
// server to give it to, and the user would believe it was sent.
func (f *watchFlags) passwordForNoServer(fset *pflag.FlagSet, entries []serverEntry) error {
	if f.password == "" || len(entries) == 0 || fset.Changed("url") {
		return nil
	}
	return fmt.Errorf("a password is given (%s) but no --url to send it to: the config file's [[opencode]] tables (%s) each take their own; put it in a file named by the table's password-file (chmod 600), or pass --url for the server it belongs to",
		f.passwordOrigin(), f.config)
}

// ambientPassword sets aside a password that came from
// $OPENCODE_SERVER_PASSWORD when the config file's [[opencode]] tables
// name the servers and no URL is given (by flag, environment or file):
// people export that variable for OpenCode itself, and each table takes
// its own password-file, so it is meant for no server here. It reports
// whether it did, for the caller to say so once. A password the config
// file holds, which the variable had overridden, is the one given again
// (and refused as a password for no server); one typed as --password
// was meant, and is kept (and refused too).
func (f *watchFlags) ambientPassword(fset *pflag.FlagSet, entries []serverEntry) bool {
	if len(entries) == 0 || fset.Changed("url") {
		return false
	}
	if f.usernameFromEnv {
		// Exported for OpenCode too: a table without a username gets
		// OpenCode's default user, as it gets no ambient password.
		f.username = fset.Lookup("username").DefValue
	}
	if f.passwordSource != "env "+envName("password") {
		return false
	}
	f.password, f.passwordSource = "", ""
	fset.Lookup("password").Changed = false // not given: the service is followed as without it
	if pw, ok := f.file.data["password"]; ok {
		f.password, f.passwordSource = fmt.Sprint(pw), "config file "+f.config
		fset.Lookup("password").Changed = true
	}
	return true
}

// passwordOrigin names where the password came from, for an error.
func (f *watchFlags) passwordOrigin() string {
	if f.passwordSource != "" {
		return "from " + f.passwordSource
	}
	return "--password or $OPENCODE_SERVER_PASSWORD"
}

// checkPlainHTTP refuses to send a password to rawURL when it is plain
// http to a host that is not loopback: basic auth there is readable by
// anyone on the network path. Loopback is 127.0.0.0/8, ::1 and localhost
// (a sidecar in a pod's or a compose service's network namespace reaches
// OpenCode at 127.0.0.1); a name is not resolved, since it could resolve
// anywhere.
func checkPlainHTTP(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || !strings.EqualFold(u.Scheme, "http") || loopback.Host(u.Host) {
		return nil // https, loopback, or a URL opencode.New refuses on its own
	}
	return fmt.Errorf("OpenCode at %s is plain http to another host: the password would cross the network readable by anyone on the way (basic auth is not encrypted); use https, or an SSH tunnel to 127.0.0.1, or pass --allow-http-password to send it anyway", opencode.Redact(rawURL))
}

// servers is the list of OpenCode servers to watch: each --url (with
// --username and --password), each [[opencode]] table of the config file
// (with its own password file), and the OpenCode 2 background service
// unless a URL or password is given (see followService). The 1.x
// default URL is watched only when nothing else is (by the service's
// server, while no service runs).
func (f *watchFlags) servers(fset *pflag.FlagSet, log *slog.Logger) ([]daemon.Target, error) {
	entries, err := f.file.servers()
	if err != nil {
		return nil, err
	}
	var out []daemon.Target
	if f.ambientPassword(fset, entries) {
		log.Info("$"+envName("password")+" is set but not used: each [[opencode]] table of the config file uses its own password-file", "config", f.config)
	}
	service := f.followService(fset)
	if err := f.passwordForNoServer(fset, entries); err != nil {
		return nil, err
	}
	if fset.Changed("url") || len(entries) == 0 && service == "" {
		if f.password != "" && len(f.urls) > 1 {
			return nil, fmt.Errorf("one password (%s) would be sent to each of %d OpenCode servers (--url %s), and each would learn the others'; give each server its own: an [[opencode]] table per server in the config file (%s), with url and password-file (a file holding that server's password, chmod 600)",
				f.passwordOrigin(), len(f.urls), strings.Join(f.urls, ", --url "), f.config)
		}
		for _, u := range f.urls {
			out = append(out, daemon.Target{URL: u, Username: f.username, Password: f.password})
		}
	}
	for _, e := range entries {
		sc := daemon.Target{URL: e.URL, Username: cmp.Or(e.Username, f.username), Directories: e.Directory}
		if e.PasswordFile != "" {
			if sc.Password, err = readPasswordFile(e.PasswordFile); err != nil {
				return nil, err
			}
		}
		out = append(out, sc)
	}
	if service != "" {
		out = append(out, f.serviceServer(service, len(entries) == 0))
		log.Info("looking for the OpenCode 2 service", "file", service, "other_channels", service == defaultServiceFile())
	}
	for _, sc := range out {
		if sc.Password != "" && sc.Discover == nil && !f.allowHTTPPassword {
			if err := checkPlainHTTP(sc.URL); err != nil {
				return nil, err
			}
		}
	}
	seen := map[string]bool{}
	for _, sc := range out {
		// The service counts at the URL its file names now: listing it
		// again would give one server two engines.
		n := registry.NormalizeURL(sc.URL)
		if seen[n] {
			return nil, fmt.Errorf("OpenCode server %s is listed twice (the OpenCode 2 service file names it too, or --url and the config file both do)", opencode.Redact(sc.URL))
		}
		seen[n] = true
	}
	return out, nil
}
