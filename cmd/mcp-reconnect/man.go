package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

func newMan() *cobra.Command {
	return &cobra.Command{
		Use:   "man [DIR]",
		Short: "Write the manual pages",
		Long: `man writes the manual pages of mcp-reconnect, generated from the same text as
--help: with DIR, one page per command into DIR (mcp-reconnect.1,
mcp-reconnect-watch.1, …; DIR is created if missing); without, the page of
mcp-reconnect itself to standard output.

Flag defaults in the pages are this user's (the config file's path, for
one), as --help shows them.

It reads no flags, environment variables or files.`,
		Example: `  mcp-reconnect man | man -l -
  mcp-reconnect man ~/.local/share/man/man1 && man mcp-reconnect-watch`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			root.DisableAutoGenTag = true
			header := &doc.GenManHeader{Title: "MCP-RECONNECT", Section: "1", Source: "mcp-reconnect " + versionString(), Manual: "User Commands"}
			if len(args) == 0 {
				return doc.GenMan(root, header, cmd.OutOrStdout())
			}
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			if err := doc.GenManTree(root, header, args[0]); err != nil {
				return fmt.Errorf("writing man pages to %s: %w", args[0], err)
			}
			return nil
		},
	}
}
