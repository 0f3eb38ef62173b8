package gitcmd

import (
	"regexp"
	"strconv"
	"strings"
)

// Refs the hub keeps in a project's repository.
const (
	UploadRefPrefix     = "refs/drover/uploads/"     // users push sources here (and nowhere else)
	JobRefPrefix        = "refs/drover/jobs/"        // a job's head: its base, then each publication
	CheckpointRefPrefix = "refs/drover/checkpoints/" // JOB/N: the head at checkpoint N
)

// ZeroID is git's "no object" id, the old value of a ref that must not exist.
const ZeroID = "0000000000000000000000000000000000000000"

// JobRef is the ref holding a job's head.
func JobRef(jobID string) string { return JobRefPrefix + jobID }

// CheckpointRef is the ref of a job's checkpoint n (from 1).
func CheckpointRef(jobID string, n int) string {
	return CheckpointRefPrefix + jobID + "/" + strconv.Itoa(n)
}

var (
	projectNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	commitIDRE    = regexp.MustCompile(`^[0-9a-f]{40}$`)
	uploadNameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// ValidProject reports whether name can be a project: 1-64 lower-case
// letters, digits and ._-, not ending in .git or .lock (the repository
// directory is NAME.git).
func ValidProject(name string) bool {
	return projectNameRE.MatchString(name) && !strings.HasSuffix(name, ".git") &&
		!strings.HasSuffix(name, ".lock") && !strings.Contains(name, "..")
}

// ValidCommitID reports whether s is a full, lower-case SHA-1 commit id.
func ValidCommitID(s string) bool { return commitIDRE.MatchString(s) }

// ValidUploadRef reports whether ref is a ref users may push:
// refs/drover/uploads/NAME with one plain path component.
func ValidUploadRef(ref string) bool {
	name, ok := strings.CutPrefix(ref, UploadRefPrefix)
	// Not ending in "." either (found by FuzzNames): git check-ref-format
	// refuses such a ref, so the hub let through a push git then failed.
	return ok && uploadNameRE.MatchString(name) && !strings.HasSuffix(name, ".lock") &&
		!strings.HasSuffix(name, ".") && !strings.Contains(name, "..")
}

// Short is a commit id abbreviated for messages and logs.
func Short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
