module github.com/mcp-reconnect/mcp-reconnect/test/release

go 1.26.8

replace github.com/mcp-reconnect/mcp-reconnect => ../..

require (
	github.com/mcp-reconnect/mcp-reconnect v0.0.0
	github.com/sassoftware/go-rpmutils v0.4.0
)

require (
	github.com/DataDog/zstd v1.5.5 // indirect
	github.com/ProtonMail/go-crypto v1.0.0 // indirect
	github.com/cloudflare/circl v1.3.8 // indirect
	github.com/creack/pty v1.1.24 // indirect
	github.com/klauspost/compress v1.20.1 // indirect
	github.com/ulikunitz/xz v0.5.12 // indirect
	github.com/xi2/xz v0.0.0-20171230120015-48954b6210f8 // indirect
	golang.org/x/crypto v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
