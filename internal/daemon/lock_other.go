//go:build !unix

package daemon

import (
	"errors"

	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
)

func lockRegistry(*registry.Registry) (func(), error) {
	return nil, errors.New("the OpenCode 2 service watch is available on Linux and macOS only")
}
