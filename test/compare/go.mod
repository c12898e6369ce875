module github.com/mcp-reconnect/mcp-reconnect/test/compare

go 1.26.8

replace github.com/mcp-reconnect/mcp-reconnect => ../..

require (
	github.com/getkin/kin-openapi v0.153.0
	github.com/mcp-reconnect/mcp-reconnect v0.0.0
	github.com/pb33f/libopenapi v0.42.4
	github.com/r3labs/sse/v2 v2.10.0
	github.com/tidwall/gjson v1.20.2
	github.com/tmaxmax/go-sse v0.12.0
	github.com/valyala/fastjson v1.6.10
)

require (
	github.com/bahlo/generic-list-go v0.2.0 // indirect
	github.com/buger/jsonparser v1.1.2 // indirect
	github.com/go-openapi/jsonpointer v0.22.5 // indirect
	github.com/go-openapi/swag/jsonname v0.25.5 // indirect
	github.com/pb33f/go-yaml v0.1.1 // indirect
	github.com/pb33f/jsonpath v0.8.5 // indirect
	github.com/pb33f/ordered-map/v2 v2.3.2 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	github.com/tailscale/hujson v0.0.0-20260727124030-b80ff77dac4f // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.3.0 // indirect
	go.yaml.in/yaml/v4 v4.0.0 // indirect
	golang.org/x/net v0.0.0-20191116160921-f9c825593386 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.14.0 // indirect
	gopkg.in/cenkalti/backoff.v1 v1.1.0 // indirect
)
