package rules

import (
	"slices"
	"strings"
	"testing"
)

func TestHubURLs(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string // part of the error; "" for none
	}{
		{in: "http://a:1", want: []string{"http://a:1"}},
		{in: "http://a:1/, HTTPS://B.example", want: []string{"http://a:1", "https://b.example"}},
		{in: "a:1,b:2", want: []string{"http://a:1", "http://b:2"}},
		{in: "", wantErr: "empty"},
		{in: " , ", wantErr: "entry 1 is empty"},
		{in: "http://a:1,", wantErr: "entry 2 is empty"},
		{in: "http://a:1,http://A:1/", wantErr: "listed twice"},
		{in: "http://a:1,ftp://b", wantErr: "entry 2: hub URL \"ftp://b\": scheme"},
		{in: "http://a:1,http://u:p@b", wantErr: "only scheme"},
		{in: "http://a:1,http://b/?x=1", wantErr: "only scheme"},
		{in: strings.Repeat("h:1,", MaxHubs) + "h:2", wantErr: "at most"},
	}
	for _, tt := range tests {
		got, err := HubURLs(tt.in)
		switch {
		case tt.wantErr == "" && (err != nil || !slices.Equal(got, tt.want)):
			t.Errorf("HubURLs(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("HubURLs(%q) = %q, %v; want an error with %q", tt.in, got, err, tt.wantErr)
		}
	}
	if _, err := HubURL("http://a:1,http://b:2"); err == nil || !strings.Contains(err.Error(), "comma") {
		t.Errorf("HubURL of a list = %v; want the comma named", err)
	}
}
