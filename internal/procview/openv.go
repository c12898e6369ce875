package procview

// openCodeConfigVars are the variables OpenCode finds its config files
// with (opencode.ConfigEnv says how each one is used). OpenCode reads its
// own environment, so a daemon that resolves those files for an OpenCode
// it did not start must take them from that process, not from its own:
// a TUI started with OPENCODE_CONFIG_DIR set, or by another login with
// another HOME, reads other files than the daemon would.
var openCodeConfigVars = []string{
	"HOME",
	"XDG_CONFIG_HOME",
	"OPENCODE_CONFIG",
	"OPENCODE_CONFIG_DIR",
	"OPENCODE_CONFIG_CONTENT",
	"OPENCODE_DISABLE_PROJECT_CONFIG",
	"OPENCODE_CONFIG_PROJECT_DISABLE",
	"OPENCODE_TEST_HOME",
	"OPENCODE_TEST_MANAGED_CONFIG_DIR",
}

// OpenCodeEnv reads, of the environment of process pid (an OpenCode),
// only the variables its config files depend on, and returns them as a
// getenv for opencode.ConfigEnv: any other name answers "". ok is false
// when t cannot read environments or pid's cannot be read (it is another
// user's, or gone): the caller falls back to its own environment then.
//
// OPENCODE_CONFIG_CONTENT may hold secrets (a remote server's headers):
// what getenv answers is never to be logged.
func OpenCodeEnv(t Table, pid int) (getenv func(string) string, ok bool) {
	r, ok := t.(EnvReader)
	if !ok {
		return nil, false
	}
	vars := make(map[string]string, len(openCodeConfigVars))
	for _, name := range openCodeConfigVars {
		v, set, err := r.Env(pid, name)
		if err != nil {
			return nil, false
		}
		if set {
			vars[name] = v
		}
	}
	return func(name string) string { return vars[name] }, true
}
