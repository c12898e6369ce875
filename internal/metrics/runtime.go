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

// memstats are the go_memstats_* gauges and counters, under the names the
// Prometheus client's Go collector gives them, so dashboards made for Go
// programs read the daemon too.
var memstats = []struct {
	name, help, typ string
	value           func(*runtime.MemStats) float64
}{
	{"alloc_bytes", "Bytes of heap objects allocated and still in use.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.HeapAlloc) }},
	{"alloc_bytes_total", "Bytes allocated for heap objects, freed or not.", "counter", func(m *runtime.MemStats) float64 { return float64(m.TotalAlloc) }},
	{"buck_hash_sys_bytes", "Bytes of the profiling bucket hash table.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.BuckHashSys) }},
	{"frees_total", "Heap objects freed.", "counter", func(m *runtime.MemStats) float64 { return float64(m.Frees) }},
	{"gc_sys_bytes", "Bytes of garbage collection metadata.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.GCSys) }},
	{"heap_alloc_bytes", "Bytes of heap objects allocated and still in use.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.HeapAlloc) }},
	{"heap_idle_bytes", "Bytes of heap spans with no objects.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.HeapIdle) }},
	{"heap_inuse_bytes", "Bytes of heap spans with at least one object.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.HeapInuse) }},
	{"heap_objects", "Heap objects allocated and still in use.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.HeapObjects) }},
	{"heap_released_bytes", "Bytes of idle heap spans given back to the system.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.HeapReleased) }},
	{"heap_sys_bytes", "Bytes of heap memory taken from the system.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.HeapSys) }},
	{"last_gc_time_seconds", "When the last garbage collection ended, in seconds since 1970.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.LastGC) / 1e9 }},
	{"mallocs_total", "Heap objects allocated.", "counter", func(m *runtime.MemStats) float64 { return float64(m.Mallocs) }},
	{"mcache_inuse_bytes", "Bytes of mcache structures in use.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.MCacheInuse) }},
	{"mcache_sys_bytes", "Bytes of mcache structures taken from the system.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.MCacheSys) }},
	{"mspan_inuse_bytes", "Bytes of mspan structures in use.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.MSpanInuse) }},
	{"mspan_sys_bytes", "Bytes of mspan structures taken from the system.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.MSpanSys) }},
	{"next_gc_bytes", "Heap size at which the next garbage collection starts.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.NextGC) }},
	{"other_sys_bytes", "Bytes of other runtime allocations.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.OtherSys) }},
	{"stack_inuse_bytes", "Bytes of goroutine stacks in use.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.StackInuse) }},
	{"stack_sys_bytes", "Bytes of stack memory taken from the system.", "gauge", func(m *runtime.MemStats) float64 { return float64(m.StackSys) }},
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
		sample(w, "process_virtual_memory_bytes", "Virtual memory, in bytes.", "gauge", float64(st.VirtualMemory()))
		if start, err := st.StartTime(); err == nil {
			sample(w, "process_start_time_seconds", "When the process started, in seconds since 1970.", "gauge", start)
		}
	}
	if n, err := p.FileDescriptorsLen(); err == nil {
		sample(w, "process_open_fds", "Open file descriptors.", "gauge", float64(n))
	}
	if l, err := p.Limits(); err == nil {
		sample(w, "process_max_fds", "The limit of open file descriptors.", "gauge", float64(l.OpenFiles))
		sample(w, "process_virtual_memory_max_bytes", "The limit of virtual memory, in bytes.", "gauge", float64(l.AddressSpace))
	}
	if n, err := p.Netstat(); err == nil {
		// The network namespace's IP octets, as the Prometheus client
		// reports them.
		var in, out float64
		if n.InOctets != nil {
			in = *n.InOctets
		}
		if n.OutOctets != nil {
			out = *n.OutOctets
		}
		sample(w, "process_network_receive_bytes_total", "Bytes received over the network (of the network namespace).", "counter", in)
		sample(w, "process_network_transmit_bytes_total", "Bytes sent over the network (of the network namespace).", "counter", out)
	}
}

// sample writes a metric of one unlabelled sample.
func sample(w *bufio.Writer, name, help, typ string, v float64) {
	header(w, name, help, typ)
	w.WriteString(name + " " + number(v) + "\n")
}

func number(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
