module github.com/mcp-reconnect/mcp-reconnect/test/compare

go 1.26.8

replace github.com/mcp-reconnect/mcp-reconnect => ../..

require (
	github.com/mcp-reconnect/mcp-reconnect v0.0.0
	github.com/r3labs/sse/v2 v2.10.0
	github.com/tidwall/gjson v1.20.2
	github.com/tmaxmax/go-sse v0.12.0
	github.com/valyala/fastjson v1.6.10
)

require (
	github.com/stretchr/testify v1.11.1 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.3.0 // indirect
	golang.org/x/net v0.0.0-20191116160921-f9c825593386 // indirect
	gopkg.in/cenkalti/backoff.v1 v1.1.0 // indirect
)
