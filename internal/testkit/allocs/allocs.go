// Package allocs measures what a call allocates, for tests that bound
// memory by the size of the input (the fuzz targets of rules and
// pipeline/spec). It imports nothing of drover's, so that any package's
// tests can use it.
package allocs

import "runtime"

// Least is the fewest bytes f allocated over three runs: a GC or the
// fuzzer's own work may land in one.
func Least(f func()) uint64 {
	var least uint64
	for i := range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; i == 0 || n < least {
			least = n
		}
	}
	return least
}
