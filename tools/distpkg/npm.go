package main

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
)

// The npm packages, as OpenCode ships itself on npm: the package
// mcp-reconnect holds a small command (npm/bin/mcp-reconnect.cjs) and
// names one optional dependency per OS and CPU, @mcp-reconnect/OS-CPU,
// each holding that platform's release binary and saying its "os" and
// "cpu", so npm installs only the one that matches (and `npm install` on a
// platform with no binary fails on mcp-reconnect's own "os" and "cpu").
// Nothing is downloaded at install time and there is no install script.
//
// npm/ is the mcp-reconnect package as it ships, every file of it; the
// release adds to its package.json the version, licence, homepage, "os",
// "cpu" and the optional dependencies, and adds LICENSE, README.md and
// THIRD_PARTY_NOTICES. The OpenCode plugin is npm/plugin/: OpenCode 1.x
// loads the package's "main" (npm/plugin/index.mjs), 2.x its index.mjs;
// npm/lib/binary.cjs finds the binary for the command and the plugin
// alike.
//
//go:embed all:npm
var npmFiles embed.FS

// NPMName is the npm package users install; NPMScope holds the platform
// packages.
const (
	NPMName  = "mcp-reconnect"
	NPMScope = "@mcp-reconnect"
)

// npmPlatform is npm's name (Node's process.platform and process.arch) of
// a GOOS and GOARCH the release builds.
var (
	npmOS  = map[string]string{"linux": "linux", "darwin": "darwin"}
	npmCPU = map[string]string{"amd64": "x64", "arm64": "arm64"}
)

// npmPlatform is b's "OS-CPU" in npm's names (linux-x64), or an error for
// a platform npm packages are not built for.
func npmPlatform(b Binary) (string, error) {
	goos, ok1 := npmOS[b.OS]
	cpu, ok2 := npmCPU[b.Arch]
	if !ok1 || !ok2 {
		return "", fmt.Errorf("no npm package for %s/%s", b.OS, b.Arch)
	}
	return goos + "-" + cpu, nil
}

// NPMAsset is the file name of the tarball of the platform package of b,
// or of the mcp-reconnect package for the zero Binary.
func NPMAsset(b Binary) string {
	if b == (Binary{}) {
		return "mcp-reconnect-npm.tgz"
	}
	p, _ := npmPlatform(b)
	return "mcp-reconnect-npm-" + p + ".tgz"
}

// semver is a version npm accepts (semver.org's grammar, without build
// metadata, which the registry drops).
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*)?$`)

// NPMVersion is the release's version for npm: without the "v". A tag
// (v1.2.3) is a release, a Go pseudo-version
// (v0.0.0-20261207101500-abcdef123456) a pre-release of one, whose single
// identifier holds the commit's time and hash.
func NPMVersion(version string) (string, error) {
	v := strings.TrimPrefix(version, "v")
	if !semver.MatchString(v) {
		return "", fmt.Errorf("version %q is not a semantic version npm accepts", version)
	}
	return v, nil
}

// npmPackages returns each npm tarball's file name and bytes: a platform
// package per binary, then mcp-reconnect.
func (o Options) npmPackages(bins []Binary, read func(Binary) ([]byte, error)) (map[string][]byte, error) {
	version, err := NPMVersion(o.Version)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	deps := map[string]string{}
	var oses, cpus []string
	for _, b := range bins {
		plat, err := npmPlatform(b)
		if err != nil {
			return nil, err
		}
		bin, err := read(b)
		if err != nil {
			return nil, err
		}
		name := NPMScope + "/" + plat
		deps[name] = version
		oses, cpus = appendNew(oses, npmOS[b.OS]), appendNew(cpus, npmCPU[b.Arch])
		manifest := map[string]any{
			"name": name, "version": version, "license": o.License, "homepage": o.Homepage,
			"description":     fmt.Sprintf("The mcp-reconnect binary for %s %s, installed by the %s package", npmOS[b.OS], npmCPU[b.Arch], NPMName),
			"os":              []string{npmOS[b.OS]},
			"cpu":             []string{npmCPU[b.Arch]},
			"preferUnplugged": true,
		}
		readme := fmt.Sprintf("# %s\n\nThe mcp-reconnect binary for %s %s. Install the `%s` package, which runs it:\n\n    npm install -g %s\n\n%s\n",
			name, npmOS[b.OS], npmCPU[b.Arch], NPMName, NPMName, o.Homepage)
		files := []entry{{"bin/mcp-reconnect", 0o755, bin}, {"README.md", 0o644, []byte(readme)}}
		if out[NPMAsset(b)], err = o.npmTarball(manifest, files); err != nil {
			return nil, err
		}
	}
	manifest, files, err := o.npmMain()
	if err != nil {
		return nil, err
	}
	sort.Strings(oses)
	sort.Strings(cpus)
	manifest["version"], manifest["license"], manifest["homepage"] = version, o.License, o.Homepage
	manifest["os"], manifest["cpu"], manifest["optionalDependencies"] = oses, cpus, deps
	if out[NPMAsset(Binary{})], err = o.npmTarball(manifest, append(files, entry{"README.md", 0o644, o.Readme})); err != nil {
		return nil, err
	}
	return out, nil
}

func appendNew(list []string, s string) []string {
	for _, v := range list {
		if v == s {
			return list
		}
	}
	return append(list, s)
}

// npmMain reads npm/: its package.json, and its other files, those its
// "bin" names executable; its "main" (the OpenCode plugin) must be one of
// them.
func (o Options) npmMain() (map[string]any, []entry, error) {
	raw, err := npmFiles.ReadFile("npm/package.json")
	if err != nil {
		return nil, nil, err
	}
	var manifest map[string]any
	if err := json.Unmarshal(raw, &manifest); err != nil {
		return nil, nil, fmt.Errorf("npm/package.json: %w", err)
	}
	if manifest["name"] != NPMName {
		return nil, nil, fmt.Errorf("npm/package.json names %v, not %s", manifest["name"], NPMName)
	}
	bins := map[string]bool{}
	if m, ok := manifest["bin"].(map[string]any); ok {
		for _, p := range m {
			bins[path.Clean(fmt.Sprint(p))] = true
		}
	}
	if m, ok := manifest["main"].(string); ok {
		if _, err := fs.Stat(npmFiles, path.Join("npm", m)); err != nil {
			return nil, nil, fmt.Errorf("npm/package.json's main names %s, which is not in npm/", m)
		}
	}
	var files []entry
	err = fs.WalkDir(npmFiles, "npm", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == "npm/package.json" {
			return err
		}
		body, err := npmFiles.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, "npm/")
		mode := fs.FileMode(0o644)
		if bins[rel] {
			mode = 0o755
			delete(bins, rel)
		}
		files = append(files, entry{rel, mode, body})
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	for p := range bins {
		return nil, nil, fmt.Errorf("npm/package.json's bin names %s, which is not in npm/", p)
	}
	return manifest, files, nil
}

// npmTarball is a package as `npm publish` takes it: every file under
// package/, with the package.json of manifest, LICENSE and
// THIRD_PARTY_NOTICES; reproducible as the archives are.
func (o Options) npmTarball(manifest map[string]any, files []entry) ([]byte, error) {
	var pj bytes.Buffer
	enc := json.NewEncoder(&pj)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(manifest); err != nil {
		return nil, err
	}
	all := []entry{{"package.json", 0o644, pj.Bytes()}, {"LICENSE", 0o644, o.LicenseText}, {NoticesFile, 0o644, o.Notices}}
	for _, f := range files {
		all = append(all, entry{f.name, f.mode, f.body})
	}
	for i := range all {
		all[i].name = "package/" + all[i].name
	}
	return o.tarGz(withDirs(all))
}
