package opencode

import "errors"

// Placeholders until the helpers' branches merge (lead).
var ErrRefused = errors.New("opencode refused the connection")
