// Package examples checks the deployment examples in examples/ against
// the binary: every flag and environment variable they give mcp-reconnect
// exists (watch --help says so), every port agrees with the others, the
// YAML parses, the password only ever comes from a file, and the
// configuration each example gives the daemon really runs: the built
// binary, started with exactly those arguments, environment and config
// file (only paths, the OpenCode URL and the status port moved to this
// machine), becomes ready against a fake OpenCode and answers the probes
// as the kubelet asks them.
package examples

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcp-reconnect/mcp-reconnect/internal/loopback"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// imageRepo is the Makefile's IMAGE_REPO: the examples run the release's
// image.
const imageRepo = "ghcr.io/mcp-reconnect/mcp-reconnect"

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpr-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "mcp-reconnect")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/mcp-reconnect")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	helpFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z][a-z0-9-]*)`)
	helpEnv  = regexp.MustCompile(`\$([A-Z][A-Z0-9_]*)`)
)

// help is what `mcp-reconnect CMD --help` offers: its flags and the
// environment variables it names.
func help(t *testing.T, cmd string) (flags, env map[string]bool) {
	t.Helper()
	out, err := exec.Command(bin, cmd, "--help").Output()
	if err != nil {
		t.Fatalf("%s --help: %v", cmd, err)
	}
	flags, env = map[string]bool{}, map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	for _, m := range helpEnv.FindAllStringSubmatch(string(out), -1) {
		env[m[1]] = true
	}
	if !flags["help"] || !flags["status-addr"] {
		t.Fatalf("could not read %s --help:\n%s", cmd, out)
	}
	return flags, env
}

// xdgEnv are variables the daemon reads that --help does not list: where
// its state (the registry of running daemons) and config live.
var xdgEnv = map[string]bool{"XDG_STATE_HOME": true, "XDG_CONFIG_HOME": true, "HOME": true}

// checkArgs checks a command line given to the image (whose entrypoint is
// `mcp-reconnect watch`) and returns its flags' values.
func checkArgs(t *testing.T, where string, args []string, flags map[string]bool) map[string]string {
	t.Helper()
	vals := map[string]string{}
	for i := 0; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "--")
		if !ok {
			t.Errorf("%s: argument %q is not a flag", where, args[i])
			continue
		}
		name, val, hasVal := strings.Cut(name, "=")
		if !flags[name] {
			t.Errorf("%s: flag --%s does not exist (mcp-reconnect watch --help)", where, name)
		}
		if name == "password" {
			t.Errorf("%s: a password as an argument shows in ps: use --password-file", where)
		}
		if !hasVal && name != "status-public" && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			i++
			val = args[i]
		}
		vals[name] = val
	}
	return vals
}

// checkEnv checks the environment given to mcp-reconnect.
func checkEnv(t *testing.T, where string, env map[string]string, names map[string]bool) {
	t.Helper()
	for k := range env {
		if !names[k] && !xdgEnv[k] {
			t.Errorf("%s: environment variable %s is read by nothing (mcp-reconnect watch --help)", where, k)
		}
		if strings.Contains(k, "PASSWORD") && k != "MCP_RECONNECT_PASSWORD_FILE" {
			t.Errorf("%s: %s puts a password in the environment: use a password file", where, k)
		}
	}
}

func port(t *testing.T, where, hostport string) int {
	t.Helper()
	if u, err := url.Parse(hostport); err == nil && u.Host != "" {
		hostport = u.Host
	}
	_, p, err := net.SplitHostPort(hostport)
	n, err2 := strconv.Atoi(p)
	if err != nil || err2 != nil {
		t.Fatalf("%s: %q has no port", where, hostport)
	}
	return n
}

func readYAML(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var docs []map[string]any
	dec := yaml.NewDecoder(f)
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if err != nil {
			if err.Error() == "EOF" {
				return docs
			}
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// at walks a parsed YAML document: keys for maps, indexes for lists.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: not a map at %q", path, k)
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("%v: no item %d", path, k)
			}
			v = l[k]
		}
	}
	return v
}

func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// daemonRun is how an example runs mcp-reconnect.
type daemonRun struct {
	args   []string          // after the image's entrypoint (watch)
	env    map[string]string // the container's environment
	config string            // the config file's content
	// password is where --password-file points in the container.
	password string
}

// run starts the built binary as the example does, with paths, the
// OpenCode URL and the status port moved to this machine, against a
// fake OpenCode, and checks it becomes ready and answers the probes with
// the pod's address as Host (as the kubelet sends it).
func (d daemonRun) run(t *testing.T) (statusAddr string, stop func()) {
	t.Helper()
	const pw = "examples-secret-pw"
	fake := fakeopencode.New(map[string]fakeopencode.Spec{"docs": {}})
	fake.Password = pw
	fake.SetHeartbeat(time.Second)
	oc := httptest.NewServer(fake)
	t.Cleanup(func() {
		oc.CloseClientConnections()
		oc.Close()
	})
	tmp := t.TempDir()
	pwFile := filepath.Join(tmp, "password")
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(tmp, "config.toml")
	if err := os.WriteFile(cfgFile, []byte(d.config), 0o644); err != nil {
		t.Fatal(err)
	}
	free, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"watch"}
	for i := 0; i < len(d.args); i++ {
		a := d.args[i]
		args = append(args, a)
		if i+1 >= len(d.args) {
			continue
		}
		switch a {
		case "--password-file":
			i++
			args = append(args, pwFile)
		case "--status-addr":
			i++
			host, _, _ := net.SplitHostPort(d.args[i])
			statusAddr = net.JoinHostPort(host, strconv.Itoa(free))
			args = append(args, statusAddr)
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp}
	for k, v := range d.env {
		switch k {
		case "OPENCODE_URL":
			v = oc.URL
		case "MCP_RECONNECT_CONFIG":
			v = cfgFile
		case "XDG_STATE_HOME", "XDG_CONFIG_HOME":
			v = filepath.Join(tmp, k)
		}
		env = append(env, k+"="+v)
	}
	logs := &ochost.Buffer{}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
			if strings.Contains(logs.String(), pw) {
				t.Error("the password reached the daemon's output")
			}
		}
	}
	t.Cleanup(stop)
	_, p, _ := net.SplitHostPort(statusAddr)
	local := "127.0.0.1:" + p
	probe := func(route string) int {
		req, _ := http.NewRequest("GET", "http://"+local+route, nil)
		req.Host = "10.1.2.3:" + p // the pod's address, as the kubelet and Prometheus send it
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(30 * time.Second)
	for probe("/readyz") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("the example's daemon (mcp-reconnect %s) never became ready:\n%s", strings.Join(args, " "), logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, route := range []string{"/healthz", "/metrics"} {
		if code := probe(route); code != http.StatusOK {
			t.Errorf("%s = %d, want 200\n%s", route, code, logs)
		}
	}
	for strings.Contains(d.config, "/workspace") && fake.Count("/mcp", "/workspace", "") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the directory the config file names was never watched:\n%s", logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return local, stop
}

// The compose example: mcp-reconnect in OpenCode's network namespace, the
// password from a secret file, ports that agree.
func TestComposeExample(t *testing.T) {
	flags, env := help(t, "watch")
	statusFlags, _ := help(t, "status")
	dir := filepath.Join("..", "..", "examples", "compose")
	docs := readYAML(t, filepath.Join(dir, "compose.yaml"))
	if len(docs) != 1 {
		t.Fatalf("%d documents", len(docs))
	}
	doc := docs[0]
	oc := at(t, doc, "services", "opencode")
	mr := at(t, doc, "services", "mcp-reconnect")
	if at(t, mr, "network_mode") != "service:opencode" {
		t.Errorf("mcp-reconnect's network_mode is %v, want service:opencode", at(t, mr, "network_mode"))
	}
	if img := fmt.Sprint(at(t, mr, "image")); !strings.HasPrefix(img, imageRepo+":") {
		t.Errorf("image %s, want the release's %s", img, imageRepo)
	}
	args := strs(at(t, mr, "command"))
	vals := checkArgs(t, "compose mcp-reconnect command", args, flags)
	envMap := map[string]string{}
	for k, v := range at(t, mr, "environment").(map[string]any) {
		envMap[k] = fmt.Sprint(v)
	}
	checkEnv(t, "compose mcp-reconnect environment", envMap, env)

	// The password: a secret file, mounted where --password-file looks.
	secret, ok := strings.CutPrefix(vals["password-file"], "/run/secrets/")
	if !ok || !contains(strs(at(t, mr, "secrets")), secret) || at(t, doc, "secrets", secret, "file") == nil {
		t.Errorf("--password-file %q is not a secret of the service from a file", vals["password-file"])
	}
	ocEntry := strings.Join(strs(at(t, oc, "entrypoint")), " ")
	if !strings.Contains(ocEntry, "/run/secrets/"+secret) || !contains(strs(at(t, oc, "secrets")), secret) {
		t.Errorf("OpenCode does not read its password from the same secret: %s", ocEntry)
	}

	// Ports: OpenCode's --port is where OPENCODE_URL points and what is
	// published; the status API's port is published (on the namespace's
	// owner) and the healthcheck asks it.
	m := regexp.MustCompile(`--port (\d+)`).FindStringSubmatch(ocEntry)
	if m == nil {
		t.Fatalf("OpenCode's entrypoint has no --port: %s", ocEntry)
	}
	ocPort, _ := strconv.Atoi(m[1])
	if p := port(t, "OPENCODE_URL", envMap["OPENCODE_URL"]); p != ocPort {
		t.Errorf("OPENCODE_URL port %d, OpenCode listens on %d", p, ocPort)
	}
	statusPort := port(t, "--status-addr", vals["status-addr"])
	published := map[int]bool{}
	for _, p := range strs(at(t, oc, "ports")) {
		parts := strings.Split(p, ":")
		n, _ := strconv.Atoi(parts[len(parts)-1])
		published[n] = true
	}
	if !published[ocPort] || !published[statusPort] {
		t.Errorf("published ports %v, want OpenCode's %d and the status API's %d", published, ocPort, statusPort)
	}
	hc := strs(at(t, mr, "healthcheck", "test"))
	if len(hc) < 3 || hc[0] != "CMD" || hc[1] != "/usr/local/bin/mcp-reconnect" {
		t.Fatalf("healthcheck %v", hc)
	}
	hcVals := checkArgs(t, "compose healthcheck", hc[3:], statusFlags)
	if port(t, "healthcheck --status-addr", hcVals["status-addr"]) != statusPort {
		t.Errorf("the healthcheck asks %s, the status API is on %d", hcVals["status-addr"], statusPort)
	}

	// The config file: mounted where MCP_RECONNECT_CONFIG points.
	var cfgSrc string
	for _, v := range strs(at(t, mr, "volumes")) {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == envMap["MCP_RECONNECT_CONFIG"] {
			cfgSrc = parts[0]
		}
	}
	cfg, err := os.ReadFile(filepath.Join(dir, cfgSrc))
	if cfgSrc == "" || err != nil {
		t.Fatalf("MCP_RECONNECT_CONFIG %s is not a mounted file of the example (%v)", envMap["MCP_RECONNECT_CONFIG"], err)
	}

	local, stop := daemonRun{args: args, env: envMap, config: string(cfg)}.run(t)
	// The healthcheck's command, against the running daemon.
	hcArgs := append([]string(nil), hc[2:]...)
	for i := range hcArgs {
		if hcArgs[i] == hcVals["status-addr"] {
			hcArgs[i] = local
		}
	}
	if out, err := exec.Command(bin, hcArgs...).CombinedOutput(); err != nil {
		t.Errorf("the healthcheck (mcp-reconnect %s) failed: %v\n%s", strings.Join(hcArgs, " "), err, out)
	}
	stop()
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// kind finds the document of a kind.
func kind(t *testing.T, docs []map[string]any, k string) map[string]any {
	t.Helper()
	for _, d := range docs {
		if d["kind"] == k {
			return d
		}
	}
	t.Fatalf("no %s", k)
	return nil
}

func container(t *testing.T, list any, name string) map[string]any {
	t.Helper()
	l, _ := list.([]any)
	for _, c := range l {
		if m, _ := c.(map[string]any); m["name"] == name {
			return m
		}
	}
	t.Fatalf("no container %s", name)
	return nil
}

// mebibytes reads a Kubernetes memory quantity in Mi or Gi.
func mebibytes(t *testing.T, q any) int {
	t.Helper()
	s := fmt.Sprint(q)
	for suffix, mul := range map[string]int{"Mi": 1, "Gi": 1024} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			v, err := strconv.Atoi(n)
			if err == nil {
				return v * mul
			}
		}
	}
	t.Fatalf("memory quantity %q: want Mi or Gi", s)
	return 0
}

// The Kubernetes example: the sidecar, the password from a Secret as a
// file, a liveness probe on /healthz and nothing that gates the pod on
// /readyz, Prometheus annotations and a ServiceMonitor on the status port,
// a PrometheusRule on the readiness gauges the daemon serves, resources
// sized from the benchmark.
func TestKubernetesExample(t *testing.T) {
	flags, env := help(t, "watch")
	docs := readYAML(t, filepath.Join("..", "..", "examples", "kubernetes", "opencode-with-mcp-reconnect.yaml"))
	dep := kind(t, docs, "Deployment")
	spec := at(t, dep, "spec", "template", "spec")
	oc := container(t, at(t, spec, "containers"), "opencode")
	mr := container(t, at(t, spec, "containers"), "mcp-reconnect")
	if img := fmt.Sprint(mr["image"]); !strings.HasPrefix(img, imageRepo+":") {
		t.Errorf("image %s, want the release's %s", img, imageRepo)
	}
	if mr["command"] != nil {
		t.Errorf("the sidecar replaces the image's entrypoint (mcp-reconnect watch): %v", mr["command"])
	}
	args := strs(mr["args"])
	vals := checkArgs(t, "sidecar args", args, flags)
	envMap := map[string]string{}
	for _, e := range at(t, mr, "env").([]any) {
		m := e.(map[string]any)
		if m["value"] == nil {
			t.Errorf("sidecar env %v takes no plain value", m["name"])
		}
		envMap[fmt.Sprint(m["name"])] = fmt.Sprint(m["value"])
	}
	checkEnv(t, "sidecar env", envMap, env)
	if _, ok := vals["status-public"]; !ok || !strings.HasPrefix(vals["status-addr"], "0.0.0.0:") {
		t.Errorf("the kubelet probes the pod's address: want --status-addr 0.0.0.0:PORT --status-public, have %v", vals)
	}

	// OpenCode's password: from the Secret, never a plain value.
	for _, e := range at(t, oc, "env").([]any) {
		m := e.(map[string]any)
		if m["name"] == "OPENCODE_SERVER_PASSWORD" && (m["value"] != nil || at(t, m, "valueFrom", "secretKeyRef") == nil) {
			t.Errorf("OpenCode's password is not from a Secret: %v", m)
		}
	}
	// The sidecar's: the init container copies the Secret's file, 0600,
	// to where --password-file looks, on a volume both mount.
	mounts := func(c map[string]any) map[string]string {
		out := map[string]string{}
		for _, v := range c["volumeMounts"].([]any) {
			m := v.(map[string]any)
			out[fmt.Sprint(m["mountPath"])] = fmt.Sprint(m["name"])
		}
		return out
	}
	init := container(t, at(t, spec, "initContainers"), "password")
	pwDir := filepath.Dir(vals["password-file"])
	initCmd := strings.Join(strs(init["command"]), " ")
	if !strings.Contains(initCmd, "-m 600") || !strings.HasSuffix(initCmd, " "+vals["password-file"]) || mounts(init)[pwDir] == "" || mounts(init)[pwDir] != mounts(mr)[pwDir] {
		t.Errorf("the init container (%s) does not put the password at --password-file %s, 0600, on a volume the sidecar mounts", initCmd, vals["password-file"])
	}
	var secretMount string
	for p, v := range mounts(init) {
		for _, vol := range at(t, spec, "volumes").([]any) {
			if m := vol.(map[string]any); m["name"] == v && m["secret"] != nil {
				secretMount = p
			}
		}
	}
	if secretMount == "" || !strings.Contains(initCmd, secretMount+"/") {
		t.Errorf("the init container copies from no Secret: %s", initCmd)
	}
	for _, c := range []map[string]any{init, mr} {
		if fmt.Sprint(at(t, c, "securityContext", "runAsUser")) != fmt.Sprint(at(t, mr, "securityContext", "runAsUser")) {
			t.Errorf("the init container and the sidecar run as different users: the password file would not be the sidecar's")
		}
	}

	// The config file: the ConfigMap's config.toml where
	// MCP_RECONNECT_CONFIG points.
	cm := kind(t, docs, "ConfigMap")
	cfgDir := filepath.Dir(envMap["MCP_RECONNECT_CONFIG"])
	cfgName := filepath.Base(envMap["MCP_RECONNECT_CONFIG"])
	cfg, _ := at(t, cm, "data", cfgName).(string)
	var cmVolume string
	for _, vol := range at(t, spec, "volumes").([]any) {
		if m := vol.(map[string]any); m["configMap"] != nil && at(t, m, "configMap", "name") == at(t, cm, "metadata", "name") {
			cmVolume = fmt.Sprint(m["name"])
		}
	}
	if cfg == "" || cmVolume == "" || mounts(mr)[cfgDir] != cmVolume {
		t.Errorf("MCP_RECONNECT_CONFIG %s is not the ConfigMap's %s mounted at %s", envMap["MCP_RECONNECT_CONFIG"], cfgName, cfgDir)
	}

	// Ports.
	ocArgs := strs(oc["args"])
	var ocPort int
	for i, a := range ocArgs {
		if a == "--port" && i+1 < len(ocArgs) {
			ocPort, _ = strconv.Atoi(ocArgs[i+1])
		}
	}
	containerPort := func(c map[string]any, name string) int {
		for _, p := range c["ports"].([]any) {
			if m := p.(map[string]any); m["name"] == name {
				return m["containerPort"].(int)
			}
		}
		t.Fatalf("container %v has no port %s", c["name"], name)
		return 0
	}
	if ocPort == 0 || containerPort(oc, "http") != ocPort || port(t, "OPENCODE_URL", envMap["OPENCODE_URL"]) != ocPort {
		t.Errorf("OpenCode listens on %d, its containerPort is %d, OPENCODE_URL says %s", ocPort, containerPort(oc, "http"), envMap["OPENCODE_URL"])
	}
	statusPort := port(t, "--status-addr", vals["status-addr"])
	if containerPort(mr, "status") != statusPort {
		t.Errorf("the sidecar's status containerPort is %d, --status-addr says %d", containerPort(mr, "status"), statusPort)
	}
	if at(t, mr, "livenessProbe", "httpGet", "path") != "/healthz" || fmt.Sprint(at(t, mr, "livenessProbe", "httpGet", "port")) != "status" {
		t.Errorf("livenessProbe = %v, want GET /healthz on the status port", at(t, mr, "livenessProbe"))
	}
	checkNoReadinessGate(t, spec)
	ann := at(t, dep, "spec", "template", "metadata", "annotations").(map[string]any)
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != strconv.Itoa(statusPort) || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("prometheus annotations %v, want scrape on %d /metrics", ann, statusPort)
	}
	svc := kind(t, docs, "Service")
	var svcStatus string
	for _, p := range at(t, svc, "spec", "ports").([]any) {
		if m := p.(map[string]any); m["targetPort"] == "status" {
			svcStatus = fmt.Sprint(m["name"])
		}
	}
	sm := kind(t, docs, "ServiceMonitor")
	if svcStatus == "" || at(t, sm, "spec", "endpoints", 0, "port") != svcStatus || at(t, sm, "spec", "endpoints", 0, "path") != "/metrics" {
		t.Errorf("the ServiceMonitor scrapes %v, the Service's status port is %q", at(t, sm, "spec", "endpoints"), svcStatus)
	}
	for k, v := range at(t, sm, "spec", "selector", "matchLabels").(map[string]any) {
		if at(t, svc, "metadata", "labels", k) != v {
			t.Errorf("the ServiceMonitor selects %s=%v, the Service is not labelled so", k, v)
		}
	}
	for k, v := range at(t, svc, "spec", "selector").(map[string]any) {
		if at(t, dep, "spec", "template", "metadata", "labels", k) != v {
			t.Errorf("the Service selects %s=%v, the pods are not labelled so", k, v)
		}
	}

	// Resources, from BENCHMARKS.md: peak RSS 30–33 MiB at 1,000 armed
	// directories (the limit leaves room above it), idle CPU a few
	// thousandths of a core.
	if at(t, mr, "resources", "requests", "cpu") == nil || mebibytes(t, at(t, mr, "resources", "requests", "memory")) < 16 ||
		mebibytes(t, at(t, mr, "resources", "limits", "memory")) < 64 {
		t.Errorf("resources %v", at(t, mr, "resources"))
	}

	// The alert: on metrics the daemon serves, with the labels its
	// annotations use.
	rules := at(t, kind(t, docs, "PrometheusRule"), "spec", "groups", 0, "rules").([]any)
	if len(rules) == 0 {
		t.Fatal("the PrometheusRule has no rules")
	}
	local, stop := daemonRun{args: args, env: envMap, config: cfg}.run(t)
	served := servedMetrics(t, local)
	for i := range rules {
		expr := fmt.Sprint(at(t, rules, i, "expr"))
		text := expr + " " + fmt.Sprint(at(t, rules, i, "annotations"))
		if at(t, rules, i, "alert") == nil || at(t, rules, i, "for") == nil || !strings.Contains(expr, "mcp_reconnect_ready") {
			t.Errorf("rule %d (%v): want an alert with a for: on mcp_reconnect_ready", i, at(t, rules, i, "alert"))
		}
		for _, name := range metricName.FindAllString(text, -1) {
			if !served[name] {
				t.Errorf("rule %v uses %s, which the daemon's /metrics does not serve", at(t, rules, i, "alert"), name)
			}
		}
	}
	stop()
}

var metricName = regexp.MustCompile(`\bmcp_reconnect_[a-z_]+`)

// servedMetrics are the metric names the daemon at addr serves.
func servedMetrics(t *testing.T, addr string) map[string]bool {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, n := range metricName.FindAllString(string(b), -1) {
		names[n] = true
	}
	if !names["mcp_reconnect_ready"] || !names["mcp_reconnect_ready_reason"] {
		t.Fatalf("/metrics serves no readiness gauges:\n%s", b)
	}
	return names
}

// checkNoReadinessGate: no mcp-reconnect container of the pod (a plain
// sidecar, or a native one: an init container with restartPolicy Always)
// has a readiness probe, nor any other probe on /readyz. A pod is ready
// only when all its containers are, so either would take a healthy
// OpenCode out of its Service whenever the sidecar cannot watch it.
func checkNoReadinessGate(t *testing.T, spec any) {
	t.Helper()
	found := 0
	for _, list := range []string{"containers", "initContainers"} {
		l, _ := at(t, spec, list).([]any)
		for _, c := range l {
			m, _ := c.(map[string]any)
			if !strings.HasPrefix(fmt.Sprint(m["image"]), imageRepo+":") {
				continue
			}
			found++
			if m["readinessProbe"] != nil {
				t.Errorf("%s %v has a readinessProbe: it would gate OpenCode's pod", list, m["name"])
			}
			for _, probe := range []string{"livenessProbe", "startupProbe"} {
				if p, _ := m[probe].(map[string]any); p != nil && strings.Contains(fmt.Sprint(p), "/readyz") {
					t.Errorf("%s %v: its %s asks /readyz: %v", list, m["name"], probe, p)
				}
			}
		}
	}
	if found == 0 {
		t.Error("no mcp-reconnect container in the pod")
	}
}
