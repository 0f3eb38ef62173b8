package chaos

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestHubDBKeepsThePasswordOutOfArgv: the hub's argv is readable by every
// local user, and its environment is cleaned, so a --db password goes to
// the hub as PGPASSWORD and never in its argv.
func TestHubDBKeepsThePasswordOutOfArgv(t *testing.T) {
	for _, tc := range []struct {
		name, db, envPW string
		wantArg         string
		wantEnv         []string
	}{
		{"sqlite", "", "", "", nil},
		{"password in the URL", "postgres://drover:s3cret@db:5432/drover?sslmode=disable", "",
			"postgres://drover@db:5432/drover?sslmode=disable", []string{"PGPASSWORD=s3cret"}},
		{"password in the environment", "postgres://drover@db/drover", "fromenv",
			"postgres://drover@db/drover", []string{"PGPASSWORD=fromenv"}},
		{"the URL's password wins", "postgres://drover:inurl@db/drover", "fromenv",
			"postgres://drover@db/drover", []string{"PGPASSWORD=inurl"}},
		{"no password", "postgres://drover@db/drover", "", "postgres://drover@db/drover", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.envPW != "" {
				t.Setenv("PGPASSWORD", tc.envPW)
			} else {
				t.Setenv("PGPASSWORD", "") // restored afterwards
				os.Unsetenv("PGPASSWORD")
			}
			arg, env, err := hubDB(tc.db)
			if err != nil {
				t.Fatal(err)
			}
			if arg != tc.wantArg || !slices.Equal(env, tc.wantEnv) {
				t.Fatalf("hubDB(%q) = %q, %q; want %q, %q", tc.db, arg, env, tc.wantArg, tc.wantEnv)
			}
			for _, a := range hubArgs(arg, 3) {
				if strings.Contains(a, "s3cret") || strings.Contains(a, "inurl") {
					t.Fatalf("hub argv carries the password: %q", a)
				}
			}
		})
	}
	if _, _, err := hubDB("postgres://u:p%zz@db/x"); err == nil || strings.Contains(err.Error(), "p%zz") {
		t.Fatalf("a bad URL: %v; want an error without the password", err)
	}
}
