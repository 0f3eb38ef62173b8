package testkit

import (
	"flag"
	"runtime"
	"strconv"
)

// ParallelPerCore lets perCore of a package's parallel tests per core run
// at once, unless the command line says how many (-parallel): go test's
// default, one per core, suits tests that compute, and leaves the cores
// idle under tests that mostly wait (on sockets, git, Postgres, a
// browser). A TestMain calls it before m.Run.
func ParallelPerCore(perCore int) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(perCore*runtime.GOMAXPROCS(0)))
	}
}
