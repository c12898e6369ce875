// Command mcpserver is an MCP server for mcp-reconnect's tests, built with
// the official Go SDK. It serves stdio or streamable HTTP and offers tools
// the tests drive: echo, and crash (the process exits at once); -exit-after
// makes it exit by itself a while after each start (a crash loop), and
// -linger keeps it running after stdin closes (an orphan when its OpenCode
// dies). It appends one JSON line per event (start, initialize, tool call)
// to -log, so tests can see what OpenCode sent it, and can start late or
// refuse for a while.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type logger struct {
	mu   sync.Mutex
	path string
}

// write appends one event line; failures are reported on stderr only,
// never on stdout (that is the stdio transport).
func (l *logger) write(kind string, fields map[string]any) {
	if l.path == "" {
		return
	}
	if fields == nil {
		fields = map[string]any{}
	}
	fields["event"] = kind
	fields["pid"] = os.Getpid()
	fields["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(fields)
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver: log:", err)
		return
	}
	defer f.Close()
	_, _ = f.Write(append(b, '\n'))
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo back"`
}

func main() {
	transport := flag.String("transport", "stdio", "stdio or http")
	addr := flag.String("addr", "127.0.0.1:0", "listen address for http")
	name := flag.String("name", "mcpserver", "server name reported in initialize")
	logPath := flag.String("log", "", "append JSON event lines here")
	startDelay := flag.Duration("start-delay", 0, "wait this long before serving")
	refuseFor := flag.Duration("refuse-for", 0, "http: answer 503 to every request for this long after start")
	strictSessions := flag.Bool("strict-sessions", false, "http: answer a request naming a session this process did not issue with 400 \"No valid session ID provided\", as the TypeScript SDK's servers do (a spec-following server answers 404, which clients recover from by themselves)")
	requireAuth := flag.Bool("require-auth", false, "http: answer every MCP request 401 and offer OAuth discovery with dynamic client registration")
	exitAfter := flag.Duration("exit-after", 0, "exit with code 2 this long after serving starts (a crash loop)")
	linger := flag.Duration("linger", 0, "stdio: keep running this long after stdin closes (its OpenCode died), as a server that outlives its parent does; SIGTERM still ends it")
	flag.Parse()

	l := &logger{path: *logPath}
	time.Sleep(*startDelay)
	started := time.Now()
	if *exitAfter > 0 {
		time.AfterFunc(*exitAfter, func() {
			l.write("exit", nil)
			os.Exit(2)
		})
	}

	s := mcp.NewServer(&mcp.Implementation{Name: *name, Version: "test"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		l.write("tool", map[string]any{"tool": "echo", "text": in.Text})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exit the server process at once"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		l.write("tool", map[string]any{"tool": "crash"})
		os.Exit(3)
		return nil, nil, nil
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "initialize" {
				l.write("initialize", nil)
			}
			return next(ctx, method, req)
		}
	})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch *transport {
	case "stdio":
		l.write("start", map[string]any{"transport": "stdio"})
		if err := s.Run(ctx, &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "mcpserver:", err)
		}
		if *linger > 0 && ctx.Err() == nil {
			l.write("linger", nil)
			select {
			case <-ctx.Done():
			case <-time.After(*linger):
			}
		}
	case "http":
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			log.Fatalf("mcpserver: %v", err)
		}
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		base := "http://" + ln.Addr().String()
		refuse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			l.write("request", map[string]any{"method": r.Method, "path": r.URL.Path})
			if *requireAuth {
				serveAuth(w, r, base)
				return
			}
			if time.Since(started) < *refuseFor {
				l.write("refused", nil)
				http.Error(w, "not ready", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
		var handler http.Handler = refuse
		if *strictSessions {
			handler = strict(refuse)
		}
		l.write("start", map[string]any{"transport": "http", "addr": ln.Addr().String()})
		fmt.Fprintln(os.Stderr, "mcpserver listening on", ln.Addr().String())
		hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			<-ctx.Done()
			_ = hs.Close()
		}()
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Fatalf("mcpserver: %v", err)
		}
	default:
		log.Fatalf("mcpserver: unknown -transport %q", *transport)
	}
}

// serveAuth plays an MCP server behind OAuth: the MCP endpoint answers 401
// pointing at its protected-resource metadata, whose authorization server
// offers dynamic client registration. OpenCode then marks the server
// needs_auth.
func serveAuth(w http.ResponseWriter, r *http.Request, base string) {
	writeJSON := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	switch r.URL.Path {
	case "/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp":
		writeJSON(map[string]any{"resource": base + "/mcp", "authorization_servers": []string{base}})
	case "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration":
		writeJSON(map[string]any{
			"issuer": base, "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/token",
			"registration_endpoint": base + "/register", "response_types_supported": []string{"code"},
			"code_challenge_methods_supported": []string{"S256"},
		})
	case "/register":
		w.WriteHeader(http.StatusCreated)
		writeJSON(map[string]any{"client_id": "test-client", "redirect_uris": []string{"http://127.0.0.1:19876/mcp/oauth/callback"}})
	default:
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+base+`/.well-known/oauth-protected-resource"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}
}

// strict remembers the session ids this process issued and refuses any
// other with 400, like the TypeScript SDK's streamable HTTP servers.
func strict(next http.Handler) http.Handler {
	var mu sync.Mutex
	issued := map[string]bool{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			mu.Lock()
			ok := issued[id]
			mu.Unlock()
			if !ok {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`))
				return
			}
		}
		next.ServeHTTP(&recordSession{ResponseWriter: w, record: func(id string) {
			mu.Lock()
			issued[id] = true
			mu.Unlock()
		}}, r)
	})
}

type recordSession struct {
	http.ResponseWriter
	record func(string)
}

func (rs *recordSession) WriteHeader(code int) {
	if id := rs.Header().Get("Mcp-Session-Id"); id != "" {
		rs.record(id)
	}
	rs.ResponseWriter.WriteHeader(code)
}

func (rs *recordSession) Write(b []byte) (int, error) {
	if id := rs.Header().Get("Mcp-Session-Id"); id != "" {
		rs.record(id)
	}
	return rs.ResponseWriter.Write(b)
}

func (rs *recordSession) Flush() {
	if f, ok := rs.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
