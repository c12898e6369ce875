package metrics

import (
	"bufio"
	"runtime"
	"runtime/debug"
	runtimemetrics "runtime/metrics"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/prometheus/procfs"
)

// memstats are the go_memstats_* series a Go dashboard (and the bench)
// reads, under the names the Prometheus client's Go collector gives them:
// the heap, stacks, the whole and the next collection's goal.
var memstats = []struct {
	name, help, typ string
	value           func(*runtime.MemStats) float64
}{
	{"alloc_bytes", "Bytes of heap objects allocated and still in use.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.HeapAlloc) }},
	{"alloc_bytes_total", "Bytes allocated for heap objects, freed or not.", "counter", func(m *runtime.MemStats) float64 { return float64(m.TotalAlloc) }},
	{"heap_idle_bytes", "Bytes of heap spans with no objects.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.HeapIdle) }},
	{"heap_inuse_bytes", "Bytes of heap spans with at least one object.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.HeapInuse) }},
	{"heap_released_bytes", "Bytes of idle heap spans given back to the system.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.HeapReleased) }},
	{"next_gc_bytes", "Heap size at which the next garbage collection starts.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.NextGC) }},
	{"stack_inuse_bytes", "Bytes of goroutine stacks in use.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.StackInuse) }},
	{"sys_bytes", "Bytes of memory taken from the system, in all.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.Sys) }},
}

// writeRuntime writes the Go runtime's metrics (go_*).
func writeRuntime(w *bufio.Writer) {
	gc := debug.GCStats{PauseQuantiles: make([]time.Duration, 5)}
	debug.ReadGCStats(&gc)
	header(w, "go_gc_duration_seconds", "Pauses of the garbage collector, in seconds.", "summary")
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		w.WriteString(`go_gc_duration_seconds{quantile="` + q + `"} ` + number(gc.PauseQuantiles[i].Seconds()) + "\n")
	}
	w.WriteString("go_gc_duration_seconds_sum " + number(gc.PauseTotal.Seconds()) + "\ngo_gc_duration_seconds_count " + strconv.FormatInt(gc.NumGC, 10) + "\n")

	settings := []runtimemetrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	runtimemetrics.Read(settings)
	sample(w, "go_gc_gogc_percent", "The garbage collector's GOGC.", "gauge", float64(settings[0].Value.Uint64()))
	sample(w, "go_gc_gomemlimit_bytes", "The Go runtime's memory limit (GOMEMLIMIT).", "gauge", float64(settings[1].Value.Uint64()))
	sample(w, "go_goroutines", "Goroutines that exist now.", "gauge", float64(runtime.NumGoroutine()))
	header(w, "go_info", "The Go version the daemon was built with.", "gauge")
	w.WriteString(`go_info{version="` + label(runtime.Version()) + `"} 1` + "\n")

	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	for _, s := range memstats {
		sample(w, "go_memstats_"+s.name, s.help, s.typ, s.value(&m))
	}
	sample(w, "go_sched_gomaxprocs_threads", "Processors the Go scheduler runs goroutines on (GOMAXPROCS).", "gauge", float64(runtime.GOMAXPROCS(0)))
	sample(w, "go_threads", "Operating system threads created.", "gauge", float64(pprof.Lookup("threadcreate").Count()))
}

// writeProcess writes the process' own metrics (process_*) where the
// system tells them (/proc: Linux).
func writeProcess(w *bufio.Writer) {
	p, err := procfs.Self()
	if err != nil {
		return
	}
	if st, err := p.Stat(); err == nil {
		sample(w, "process_cpu_seconds_total", "CPU time spent, user and system, in seconds.", "counter", st.CPUTime())
		sample(w, "process_resident_memory_bytes", "Resident memory, in bytes.", "gauge", float64(st.ResidentMemory()))
		if start, err := st.StartTime(); err == nil {
			sample(w, "process_start_time_seconds", "When the process started, in seconds since 1970.", "gauge", start)
		}
	}
	if n, err := p.FileDescriptorsLen(); err == nil {
		sample(w, "process_open_fds", "Open file descriptors.", "gauge", float64(n))
	}
	if l, err := p.Limits(); err == nil {
		sample(w, "process_max_fds", "The limit of open file descriptors.", "gauge", float64(l.OpenFiles))
	}
}

// sample writes a metric of one unlabelled sample.
func sample(w *bufio.Writer, name, help, typ string, v float64) {
	header(w, name, help, typ)
	w.WriteString(name + " " + number(v) + "\n")
}

func number(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
