package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcp-reconnect/mcp-reconnect/internal/doctor"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
)

func newDoctor() *cobra.Command {
	var f watchFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor [--url URL] [--directory D]",
		Short: "Check that mcp-reconnect can reach, authenticate to and use this OpenCode",
		Long: `doctor checks that the OpenCode server is reachable, accepts the credentials,
runs a version mcp-reconnect knows (it says which generation, 1.x or 2.x,
and where the password came from, never the password), and still offers
(in its own API description: 1.x GET /doc, 2.x GET /openapi.json) every
route, parameter, MCP status and event the daemon relies on. With no --url
and no password it checks the OpenCode 2 background service its
service.json names, if there is one. It then lists the
MCP servers that need attention: those the running daemon sees in armed
directories, and those of each --directory (reading a directory's status
starts its MCP servers, so only the ones you name are read).

A password is not sent to a plain-http URL whose host is not loopback
unless --allow-http-password is given (basic auth over plain http is
readable on the network).

It exits 0 only when nothing failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.load(cmd.Flags()); err != nil {
				return err
			}
			if _, err := opencode.New(f.urls[0], opencode.Options{}); err != nil {
				return err // a bad URL, said before any request
			}
			var dirs []string
			for _, d := range f.directories {
				abs, err := absDir(d)
				if err != nil {
					return err
				}
				dirs = append(dirs, abs)
			}
			o := doctor.Options{Directories: dirs, PasswordSource: f.passwordSource}
			if f.statusAddr != "" {
				o.Daemon = &statusapi.Client{Addr: f.statusAddr}
			}
			url, password := f.urls[0], f.password
			if file := f.serviceFile(cmd.Flags()); file != "" {
				svc, err := opencode.ReadServiceFile(file)
				if err != nil {
					return fmt.Errorf("the OpenCode 2 service file: %w (pass --url to check another server)", err)
				}
				url, password = svc.URL, svc.Password()
				o.PasswordSource = "service file " + file
			} else if password != "" && !f.allowHTTPPassword {
				if err := checkPlainHTTP(url); err != nil {
					return err // before the password is sent anywhere
				}
			}
			checks := doctor.Run(cmd.Context(), url, opencode.Options{Username: f.username, Password: password}, o)
			if asJSON {
				if err := writeIndentedJSON(cmd.OutOrStdout(), checks); err != nil {
					return err
				}
			} else {
				doctor.Write(cmd.OutOrStdout(), checks)
			}
			if !doctor.Healthy(checks) {
				return exitError{code: 1}
			}
			return nil
		},
	}
	f.register(cmd.Flags())
	f.registerOptIns(cmd.Flags(), false)
	for _, name := range []string{"initial-delay", "max-delay", "idle-interval", "jitter", "max-concurrent", "fast-attempts", "slow-interval", "log-level", "log-format", "log-file", "status-public", "probe", "toast", "netwatch"} {
		_ = cmd.Flags().MarkHidden(name)
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON")
	return cmd
}
