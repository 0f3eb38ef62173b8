package postgres

import (
	"path/filepath"
	"testing"

	"drover/internal/store"
	"drover/internal/store/sqlite"
	"drover/internal/store/storetest"
	"drover/internal/testkit"
)

// BenchmarkJobCycle runs storetest.BenchJobCycle (submit, offer, finish:
// three durable writes) on SQLite and on Postgres in one run, so the two
// compare on the same machine at the same moment.
func BenchmarkJobCycle(b *testing.B) {
	for _, engine := range []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"sqlite", func(b *testing.B) store.Store {
			s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "drover.db"))
			return storetest.Opened(b, s, err)
		}},
		{"postgres", func(b *testing.B) store.Store { return openTest(b, testkit.StartPostgres(b)) }},
	} {
		b.Run(engine.name, func(b *testing.B) { storetest.BenchJobCycle(b, engine.open(b)) })
	}
}
