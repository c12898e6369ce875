package daemon

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// alikeOC is the scale benchmark's OpenCode (test/bench): every
// directory has the same perDir local servers, all connected.
type alikeOC struct{ perDir int }

func (o alikeOC) MCPStatus(context.Context, string) (map[string]opencode.ServerStatus, error) {
	out := map[string]opencode.ServerStatus{}
	for s := range o.perDir {
		out["s"+strconv.Itoa(s)] = opencode.ServerStatus{Status: opencode.StatusConnected}
	}
	return out, nil
}

func (o alikeOC) Connect(context.Context, string, string) error { return nil }

func (o alikeOC) MCPConfig(context.Context, string) (map[string]opencode.MCPEntry, error) {
	out := map[string]opencode.MCPEntry{}
	for s := range o.perDir {
		out["s"+strconv.Itoa(s)] = opencode.MCPEntry{Type: "local", Command: []string{"node", "/home/ana/mcp/server-" + strconv.Itoa(s) + ".js", "--stdio"}}
	}
	return out, nil
}

// At the benchmark's scale (1,000 directories × 10 servers configured
// alike) the process view's servers are held once and indexed in a
// little memory: what the view keeps of the engine's list (View.Run
// hands it over as LocalServers returns it) beyond the engine's own state
// stays under 2 MiB (the one list of them, 0.7 MiB, the view's index,
// 0.6 MiB, and the commands while the engine hands out copies). A copy
// of the list costs 0.7 MiB more, a map of launchers 1 MiB, a map of
// servers in the matcher 1.8 MiB: 5.9 MiB with all three.
func TestProcessViewServersAtScaleStaySmall(t *testing.T) {
	const dirs, perDir, limit = 1000, 10, 2 << 20
	root := t.TempDir()
	writeProcTree(t, root, underOpenCode(os.Getuid()))
	tab := procFS(t, root)
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig()
		defer r.stop()
		eng := r.runEngine(t, alikeOC{perDir}, "")
		for d := range dirs {
			_ = eng.Arm(fmt.Sprintf("/bench/dir %04d", d), reconnect.ArmedByFlag)
		}
		time.Sleep(90 * time.Second) // every directory checked, its config read
		synctest.Wait()
		if _, locals, _ := eng.LocalServers(0); len(locals) != dirs*perDir {
			t.Fatalf("the engine lists %d local servers, want %d", len(locals), dirs*perDir)
		}
		v, err := procview.NewView(tab, 2000)
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, locals, _ := eng.LocalServers(0)
		v.SetServers(locals)
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(v)
		live := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		t.Logf("the view's servers hold %.2f MiB", float64(live)/(1<<20))
		if live > limit {
			t.Errorf("the process view holds %.2f MiB for %d local servers, want at most %.0f MiB: a copy of the servers is back", float64(live)/(1<<20), dirs*perDir, float64(limit)/(1<<20))
		}
	})
}
