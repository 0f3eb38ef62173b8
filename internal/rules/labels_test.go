package rules_test

import (
	"reflect"
	"strings"
	"testing"

	"drover/internal/protocol/protocoltest"
	"drover/internal/rules"
)

func TestCheckLabel(t *testing.T) {
	for _, tc := range protocoltest.LabelCases {
		t.Run(tc.Name, func(t *testing.T) {
			err := rules.CheckLabel(tc.Key, tc.Value)
			if (err == nil) != tc.OK || err != nil && !strings.Contains(err.Error(), tc.Why) {
				t.Fatalf("CheckLabel(%q, %q) = %v, want ok=%v (%q)", tc.Key, tc.Value, err, tc.OK, tc.Why)
			}
			if err2 := rules.CheckLabels(map[string]string{tc.Key: tc.Value}); (err2 == nil) != tc.OK {
				t.Fatalf("CheckLabels disagrees with CheckLabel: %v", err2)
			}
			m, err3 := rules.ParseLabels([]string{tc.Key + "=" + tc.Value})
			if (err3 == nil) != tc.OK || tc.OK && m[tc.Key] != tc.Value {
				t.Fatalf("ParseLabels disagrees with CheckLabel: %v, %v", m, err3)
			}
		})
	}
	if err := rules.CheckLabels(protocoltest.TooManyLabels()); err == nil || !strings.Contains(err.Error(), "at most 64") {
		t.Fatalf("CheckLabels of %d labels = %v", len(protocoltest.TooManyLabels()), err)
	}
}

func TestParseLabelList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
		why  string
	}{
		{in: "", want: nil},
		{in: "os=linux,gpu=", want: map[string]string{"os": "linux", "gpu": ""}},
		{in: " arch=arm64 , a=b=c", want: map[string]string{"arch": "arm64", "a": "b=c"}},
		{in: "novalue", why: `label "novalue": want k=v`},
		{in: "a=1,a=2", why: "label a is given twice"},
		{in: "gpu:x=1", why: `label key "gpu:x"`},
		{in: "a=1,", why: `label "": want k=v`},
	} {
		got, err := rules.ParseLabelList(tc.in)
		if tc.why != "" && (err == nil || !strings.Contains(err.Error(), tc.why)) || tc.why == "" && (err != nil || !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("ParseLabelList(%q) = %v, %v; want %v, %q", tc.in, got, err, tc.want, tc.why)
		}
	}
}
