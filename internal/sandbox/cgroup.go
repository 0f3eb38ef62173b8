package sandbox

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"drover/internal/retry"
)

// cgroupRoot is where cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupParents are the directories, one per controller, in which this
// process can make a child cgroup for each command. Limits whose controller
// has none fall back to rlimits, and Describe says which applied.
type cgroupParents struct {
	version int               // 1 or 2; 0 when none is usable
	dirs    map[string]string // controller (pids, memory, cpu) → parent directory
}

// findCgroups looks for writable parents for the wanted controllers. It
// costs a read of /proc/self/cgroup and a mkdir and rmdir per controller.
func findCgroups(want []string) cgroupParents {
	found := cgroupParents{dirs: map[string]string{}}
	if len(want) == 0 {
		return found
	}
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return found
	}
	defer f.Close()
	// A pure v2 machine mounts the unified hierarchy at the root; on a v1
	// or hybrid one, only the v1 controllers count.
	_, v2err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers"))
	unified := v2err == nil
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, rest, _ := strings.Cut(sc.Text(), ":")
		ctrls, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if unified != (id == "0" && ctrls == "") {
			continue
		}
		if unified {
			// Usable only where the controllers are already delegated to
			// our children: a cgroup with processes cannot enable them.
			parent := filepath.Join(cgroupRoot, path)
			sub, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
			if err != nil {
				continue
			}
			for _, c := range want {
				if slices.Contains(strings.Fields(string(sub)), c) && writable(parent) {
					found.version = 2
					found.dirs[c] = parent
				}
			}
			continue
		}
		for _, c := range strings.Split(ctrls, ",") {
			if !slices.Contains(want, c) {
				continue
			}
			for _, mount := range []string{filepath.Join(cgroupRoot, ctrls), filepath.Join(cgroupRoot, c)} {
				parent := filepath.Join(mount, path)
				if writable(parent) {
					found.version = 1
					found.dirs[c] = parent
					break
				}
			}
		}
	}
	return found
}

// writable reports whether a child cgroup can be made in dir.
func writable(dir string) bool {
	probe := filepath.Join(dir, "drover-probe-"+randomHex(6))
	if err := os.Mkdir(probe, 0o755); err != nil {
		return false
	}
	return os.Remove(probe) == nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails on Linux
	return hex.EncodeToString(b)
}

func (c cgroupParents) mechanism(ctrl string) string {
	if _, ok := c.dirs[ctrl]; ok {
		return "cgroup v" + strconv.Itoa(c.version)
	}
	return ""
}

// cgroup is one command's cgroup: a directory per controller (v1) or one
// directory (v2).
type cgroup struct{ dirs []string }

// create makes the command's cgroup with the limits whose controller has a
// parent.
func (c cgroupParents) create(l Limits) (*cgroup, error) {
	name := "drover-" + randomHex(8)
	cg := &cgroup{}
	files := map[string][][2]string{}
	if l.Pids > 0 {
		files["pids"] = [][2]string{{"pids.max", strconv.Itoa(l.Pids)}}
	}
	if l.Memory > 0 {
		if c.version == 2 {
			files["memory"] = [][2]string{{"memory.max", strconv.FormatInt(l.Memory, 10)}, {"memory.swap.max", "0"}}
		} else {
			files["memory"] = [][2]string{{"memory.limit_in_bytes", strconv.FormatInt(l.Memory, 10)}}
		}
	}
	if l.CPUs > 0 {
		quota := strconv.FormatInt(int64(l.CPUs*100000), 10)
		if c.version == 2 {
			files["cpu"] = [][2]string{{"cpu.max", quota + " 100000"}}
		} else {
			files["cpu"] = [][2]string{{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", quota}}
		}
	}
	for ctrl, fs := range files {
		parent, ok := c.dirs[ctrl]
		if !ok {
			continue
		}
		dir := filepath.Join(parent, name)
		if !slices.Contains(cg.dirs, dir) {
			if err := os.Mkdir(dir, 0o755); err != nil {
				cg.remove()
				return nil, fmt.Errorf("make cgroup: %w", err)
			}
			cg.dirs = append(cg.dirs, dir)
		}
		for _, f := range fs {
			err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0o644)
			if err != nil && f[0] != "memory.swap.max" { // absent without swap accounting
				cg.remove()
				return nil, fmt.Errorf("set cgroup limit %s: %w", f[0], err)
			}
		}
	}
	return cg, nil
}

// attach moves pid, and so every process it forks afterwards, into the
// cgroup.
func (cg *cgroup) attach(pid int) error {
	for _, dir := range cg.dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("move the sandbox into its cgroup: %w", err)
		}
	}
	return nil
}

// cgroupRemoveRetry spaces the tries of removing a busy cgroup: 100µs
// doubling, 14 tries (about 800ms in all).
func cgroupRemoveRetry() retry.Policy {
	return retry.Policy{First: 100 * time.Microsecond, Tries: 14}
}

// remove deletes the cgroup once its processes are gone; exiting processes
// can keep it busy for a moment. Cleanup has no context to end it: the
// policy's tries bound it.
func (cg *cgroup) remove() error {
	var errs []error
	for _, dir := range cg.dirs {
		err := retry.Do(context.Background(), cgroupRemoveRetry(), func(context.Context) error {
			err := unix.Rmdir(dir)
			switch {
			case err == nil || errors.Is(err, syscall.ENOENT):
				return nil
			case !errors.Is(err, syscall.EBUSY):
				return retry.Permanent(err)
			}
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
		}
	}
	cg.dirs = nil
	return errors.Join(errs...)
}
