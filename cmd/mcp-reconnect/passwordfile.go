package main

import (
	"fmt"

	"github.com/spf13/pflag"
)

// passwordFileFlag is --password-file: the password of the OpenCode
// server(s) given by --url, read from a file only this user can read, as
// the [[opencode]] tables' password files are. It is how a container gets
// its password (a mounted secret), since an argument shows in ps and an
// image's environment in every `docker inspect`.
const passwordFileFlag = "password-file"

// applyPasswordFile reads the password file, once the command line, the
// environment and the config file are applied, into --password. A
// password given as well is an error: which one is meant cannot be told.
func (f *watchFlags) applyPasswordFile(fs *pflag.FlagSet) error {
	fl := fs.Lookup(passwordFileFlag)
	if fl == nil || fl.Value.String() == "" {
		return nil
	}
	path := fl.Value.String()
	if fs.Changed("password") {
		return fmt.Errorf("--%s %s and a password (from %s) are both given; keep only the file", passwordFileFlag, path, f.passwordSource)
	}
	pw, err := readPasswordFile(path)
	if err != nil {
		return err
	}
	if err := fs.Set("password", pw); err != nil {
		return fmt.Errorf("--%s %s: %w", passwordFileFlag, path, err)
	}
	f.passwordSource = "password file " + path
	return nil
}
