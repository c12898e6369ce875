package main

import "github.com/spf13/cobra"

func newDoctor() *cobra.Command {
	return &cobra.Command{Use: "doctor", Short: "Check that this OpenCode can be reached, authenticated and used", Hidden: true}
}
