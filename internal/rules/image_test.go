package rules

import (
	"strings"
	"testing"
)

func TestCheckImage(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		ref string
		ok  bool
	}{
		{"ubuntu", true},
		{"ubuntu:22.04", true},
		{"swebench/sweb.eval.x86_64.django__django-11099", true},
		{"swebench/sweb.eval.x86_64.django__django-11099:latest", true},
		{"ghcr.io/org/team/img:v1.2-rc_3", true},
		{"localhost:5000/img", true},
		{"Registry.Example.com:443/a/b", true},
		{"img" + digest, true},
		{"img:tag" + digest, true},
		{"a--b/c__d", true},
		{"", false},
		{"-v", false},
		{"--privileged", false},
		{"img -v", false},
		{"img\n", false},
		{"img\x00", false},
		{" img", false},
		{"Ubuntu", false},
		{"Org/img", false},
		{"img:", false},
		{"img:-tag", false},
		{"img:" + strings.Repeat("t", 129), false},
		{"img@sha256:abc", false},
		{"img@md5:" + strings.Repeat("ab", 32), false},
		{"a//b", false},
		{"a/", false},
		{"/a", false},
		{"a_/b", false},
		{"a:b:c", false},
		{"a/b:1/c", false},
		{"$(id)", false},
		{"img;rm", false},
		{"ímg", false},
		{strings.Repeat("a", MaxImageLen+1), false},
	} {
		if err := CheckImage(tc.ref); (err == nil) != tc.ok {
			t.Errorf("CheckImage(%q) = %v, want ok=%v", tc.ref, err, tc.ok)
		}
	}
}

func TestImageAllowList(t *testing.T) {
	for _, tc := range []struct {
		patterns []string
		ok       bool
	}{
		{nil, true},
		{[]string{"a/*", "b:1", "*", "swebench/sweb.eval.x86_64.*", "ghcr.io/org/*"}, true},
		{[]string{"-x*"}, false},
		{[]string{"a b*"}, false},
		{[]string{"a/$*"}, false},
		{[]string{"Bad/img"}, false},
		{[]string{""}, false},
		{make([]string, MaxImagePatterns+1), false},
	} {
		if err := CheckImagePatterns(tc.patterns); (err == nil) != tc.ok {
			t.Errorf("CheckImagePatterns(%q) = %v, want ok=%v", tc.patterns, err, tc.ok)
		}
	}
	for _, tc := range []struct {
		image    string
		patterns []string
		ok       bool
	}{
		{"", nil, true}, // the runner's own image
		{"a/x", nil, false},
		{"a/x", []string{"a/*"}, true},
		{"a/x:1", []string{"a/*"}, true},
		{"ab/x", []string{"a/*"}, false},
		{"b/y", []string{"a/*"}, false},
		{"b/y", []string{"a/*", "b/y"}, true},
		{"b/y:2", []string{"b/y"}, false}, // exact means exact
		{"b/y", []string{"b/y:2"}, false},
		{"swebench/sweb.eval.x86_64.django__django-11099", []string{"swebench/sweb.eval.x86_64.*"}, true},
		{"swebench/sweb.eval.arm64.django__django-11099", []string{"swebench/sweb.eval.x86_64.*"}, false},
		{"anything/at:all", []string{"*"}, true},
	} {
		if got := ImageAllowed(tc.image, tc.patterns); got != tc.ok {
			t.Errorf("ImageAllowed(%q, %q) = %v, want %v", tc.image, tc.patterns, got, tc.ok)
		}
	}
}
