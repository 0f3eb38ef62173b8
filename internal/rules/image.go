package rules

import (
	"fmt"
	"regexp"
	"strings"
)

// The one rule of container images, for a job's image (the CLI, the API
// and an evaluation's dataset check it) and a runner's allow-list (the
// runner checks it before it connects, the hub at its hello, and both
// match a job's image to it with ImageAllowed). A reference that passed
// CheckImage cannot be read as an engine flag: it starts with a letter or
// digit and holds no space.

// Limits on images.
const (
	MaxImageLen      = 512 // bytes of a reference or an allow-list pattern
	MaxImagePatterns = 64  // patterns of a runner's allow-list
)

// imagePattern is a docker/OCI reference: [registry[:port]/]name[:tag][@sha256:hex],
// the name lower-case path components joined by '/', each separated
// inside by '.', '_', '__' or dashes.
var imagePattern = regexp.MustCompile(`^` +
	`(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]{1,5})?/)?` + // registry
	`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` + // name
	`(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?` + // tag
	`(?:@sha256:[a-f0-9]{64})?$`) // digest

// CheckImage refuses a container image reference that is not
// [registry[:port]/]name[:tag][@sha256:hex] of at most MaxImageLen bytes.
// A registry is told from a name's first component as the engines do: it
// holds a '.' or a ':', or is localhost.
func CheckImage(ref string) error {
	const want = "want [registry[:port]/]name[:tag][@sha256:digest], e.g. swebench/sweb.eval.x86_64.django__django-11099:latest"
	if ref == "" {
		return fmt.Errorf("image: empty; %s", want)
	}
	if len(ref) > MaxImageLen {
		return fmt.Errorf("image: %d bytes; at most %d", len(ref), MaxImageLen)
	}
	if !imagePattern.MatchString(ref) {
		return fmt.Errorf("image %q: %s", Clip(ref, 80), want)
	}
	first, _, _ := strings.Cut(ref, "/")
	if strings.Contains(ref, "/") && !strings.ContainsAny(first, ".:") && first != "localhost" && strings.ToLower(first) != first {
		// Upper case only in a registry's name.
		return fmt.Errorf("image %q: %s (a repository name is lower case)", Clip(ref, 80), want)
	}
	return nil
}

// CheckImagePatterns checks a runner's allow-list: at most
// MaxImagePatterns patterns, each an image CheckImage takes or a prefix of
// one ending in '*' ("*" alone: any image).
func CheckImagePatterns(patterns []string) error {
	if len(patterns) > MaxImagePatterns {
		return fmt.Errorf("%d image patterns; at most %d", len(patterns), MaxImagePatterns)
	}
	for _, p := range patterns {
		prefix, wild := strings.CutSuffix(p, "*")
		if !wild {
			if err := CheckImage(p); err != nil {
				return err
			}
			continue
		}
		ok := len(p) <= MaxImageLen && !strings.HasPrefix(prefix, "-")
		for _, r := range prefix {
			ok = ok && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-/:@", r))
		}
		if !ok {
			return fmt.Errorf("image pattern %q: want an image, or the start of one ending in '*' (letters, digits and ._-/:@)", Clip(p, 80))
		}
	}
	return nil
}

// ImageAllowed says whether a runner whose allow-list is patterns may run
// a job naming image: "" (the runner's own image) always, else an exact
// pattern or a prefix pattern. The hub's dispatch and the runner's own
// refusal both ask it.
func ImageAllowed(image string, patterns []string) bool {
	if image == "" {
		return true
	}
	for _, p := range patterns {
		if prefix, wild := strings.CutSuffix(p, "*"); wild && strings.HasPrefix(image, prefix) || p == image {
			return true
		}
	}
	return false
}
