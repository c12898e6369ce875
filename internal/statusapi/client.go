package statusapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client talks to a running daemon's status API.
type Client struct {
	// Addr is host:port of the API.
	Addr string
	// Token is the daemon's bearer token, sent with mutations only.
	Token string
}

// do sends the request and decodes the answer.
func do[T any](ctx context.Context, c *Client, method, path string, body any) (T, error) {
	var out T
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return out, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.Addr+path, rd)
	if err != nil {
		return out, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method != http.MethodGet && c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return out, fmt.Errorf("no mcp-reconnect daemon answers at %s (start one with `mcp-reconnect watch`, or pass --status-addr): %w", c.Addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return out, fmt.Errorf("reading %s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("mcp-reconnect at %s: %s %s answered %d: %s", c.Addr, method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("mcp-reconnect at %s: %s %s: %w", c.Addr, method, path, err)
	}
	return out, nil
}

// Status reads GET /status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	return do[Status](ctx, c, "GET", "/status", nil)
}

// Reconnect calls POST /reconnect.
func (c *Client) Reconnect(ctx context.Context, req ReconnectRequest) (ReconnectResponse, error) {
	return do[ReconnectResponse](ctx, c, "POST", "/reconnect", req)
}
