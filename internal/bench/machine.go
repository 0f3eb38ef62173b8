package bench

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// machineInfo describes this machine for the report. Missing pieces read
// "unknown": they describe the run, they do not stop it.
func machineInfo(dataDir, binary string) Machine {
	m := Machine{
		Date:      time.Now().UTC(),
		NProc:     runtime.NumCPU(),
		CPUModel:  "unknown",
		Kernel:    "unknown",
		MemTotal:  "unknown",
		GoBench:   runtime.Version(),
		GoHub:     "unknown",
		DataFS:    fsName(dataDir),
		ClockTick: clockTicks(),
		LoadStart: loadAvg(),
	}
	if v := procField("/proc/cpuinfo", "model name"); v != "" {
		m.CPUModel = v
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if v := procField("/proc/meminfo", "MemTotal"); v != "" {
		if kb, err := parseKB(v); err == nil {
			m.MemTotal = strconv.FormatFloat(float64(kb)/(1<<30), 'f', 1, 64) + " GiB"
		}
	}
	if bi, err := buildinfo.ReadFile(binary); err == nil {
		m.GoHub = bi.GoVersion
	}
	return m
}

// loadAvg returns the 1, 5 and 15 minute load averages, or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// parseKB parses "   1234 kB" into bytes.
func parseKB(s string) (int64, error) {
	fields := strings.Fields(s)
	if len(fields) != 2 || fields[1] != "kB" {
		return 0, fmt.Errorf("unexpected memory field %q", strings.TrimSpace(s))
	}
	n, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("unexpected memory field %q: %w", strings.TrimSpace(s), err)
	}
	return n << 10, nil
}

// parseStatTicks returns utime+stime (fields 14 and 15) of a /proc/PID/stat
// line. The command name (field 2) may hold spaces and parentheses, so the
// fields are counted from the last ')'.
func parseStatTicks(b []byte) (int64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat line")
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is field 3 (state), so field N is fields[N-3].
	if len(fields) < 13 {
		return 0, fmt.Errorf("stat line has %d fields after the name", len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[14-3], 10, 64)
	stime, err2 := strconv.ParseInt(fields[15-3], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed utime/stime %q %q", fields[14-3], fields[15-3])
	}
	return utime + stime, nil
}
