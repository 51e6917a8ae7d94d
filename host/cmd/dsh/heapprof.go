package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
)

// heapProfileEnv names a file the host writes its heap profile to when it
// stops serving, before the teardown frees anything: what the live
// processes, sessions and jobs cost, for `go tool pprof`. Its goroutines go
// to FILE.goroutines (they are stacks, which the heap profile does not
// count). Unset (the default), nothing is written.
const heapProfileEnv = "DSH_HEAP_PROFILE"

func writeHeapProfile(stderr io.Writer) {
	path := os.Getenv(heapProfileEnv)
	if path == "" {
		return
	}
	runtime.GC() // the profile then counts what is live, not garbage
	err := writeProfile(path, "heap", 0)
	if err == nil {
		err = writeProfile(path+".goroutines", "goroutine", 1)
	}
	if err != nil {
		fmt.Fprintf(stderr, "dsh serve: %s: %v\n", heapProfileEnv, err)
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Fprintf(stderr, "dsh serve: heap profile in %s: heap in use %d KiB, stacks %d KiB, from the OS %d KiB, %d goroutines\n",
		path, ms.HeapInuse>>10, ms.StackInuse>>10, ms.Sys>>10, runtime.NumGoroutine())
}

func writeProfile(path, name string, debug int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = pprof.Lookup(name).WriteTo(f, debug)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// cpuProfileEnv names a file the host writes its CPU profile to, from the
// start of serve until it stops serving. Its plugins are profiled with
// DSH_PLUGIN_CPU_PROFILE (a directory), which the host passes on.
const cpuProfileEnv = "DSH_CPU_PROFILE"

// startCPUProfile starts the profile cpuProfileEnv asks for and returns
// what stops it.
func startCPUProfile(stderr io.Writer) (stop func()) {
	path := os.Getenv(cpuProfileEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "dsh serve: %s: %v\n", cpuProfileEnv, err)
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				fmt.Fprintf(stderr, "dsh serve: %s: %v\n", cpuProfileEnv, err)
			}
		})
	}
}

// A profile asked for samples finely (every 4 KiB, not 512), so that what
// one job costs shows up in it.
func init() {
	if os.Getenv(heapProfileEnv) != "" {
		runtime.MemProfileRate = 4 << 10
	}
}
