package sqlstore

import (
	"database/sql"
	"maps"
	"sync"
	"sync/atomic"
)

// maxCached bounds the statements a Stmts keeps prepared: a statement
// whose text is built from its arguments (an IN list of n placeholders)
// must not grow the cache without end; past the bound statements run
// unprepared as before.
const maxCached = 1024

// Stmts counts the statements run on one database (sql.DB) and, with
// prepare, keeps each statement's text prepared on its connections, so
// that a transaction binds a prepared statement instead of parsing the SQL
// again (SQLite parses every statement it is given; Postgres's driver
// caches its own).
type Stmts struct {
	db      *sql.DB
	prepare bool
	run     atomic.Int64
	extra   atomic.Int64 // round trips that are no statement of a store method: BEGIN, COMMIT, savepoints

	mu     sync.Mutex
	cached map[string]*sql.Stmt // nil value: being prepared
	closed bool
	byText map[string]int64 // non-nil: each statement's runs (CountByText)
}

// NewStmts counts db's statements, and keeps them prepared when prepare.
func NewStmts(db *sql.DB, prepare bool) *Stmts {
	return &Stmts{db: db, prepare: prepare, cached: map[string]*sql.Stmt{}}
}

// Run is how many statements ran, commits and rollbacks not counted.
func (s *Stmts) Run() int64 {
	if s == nil {
		return 0
	}
	return s.run.Load()
}

// Trips is how many round trips the statements, commits and rollbacks
// took, one each, had every one gone to a server: Run and the BEGIN and
// COMMIT (or ROLLBACK) of each transaction, and its savepoints'
// statements (on SQLite each is a call in process).
func (s *Stmts) Trips() int64 {
	if s == nil {
		return 0
	}
	return s.run.Load() + s.extra.Load()
}

func (s *Stmts) trips(n int64) {
	if s != nil {
		s.extra.Add(n)
	}
}

// CountByText makes s count each statement's runs by its text from now
// on (a test that pins a path's statements names the ones it ran).
func (s *Stmts) CountByText() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byText == nil {
		s.byText = map[string]int64{}
	}
}

// ByText is each statement's runs since CountByText, nil before.
func (s *Stmts) ByText() map[string]int64 {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byText == nil {
		return nil
	}
	return maps.Clone(s.byText)
}

// Prepared is how many statements are kept prepared now.
func (s *Stmts) Prepared() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.cached {
		if st != nil {
			n++
		}
	}
	return n
}

// Close closes the prepared statements (before their database).
func (s *Stmts) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, st := range s.cached {
		if st != nil {
			_ = st.Close()
		}
	}
	clear(s.cached)
}

// stmt is query prepared on the database, nil when it is not kept prepared
// (prepare off, the cache full, or not prepared yet: the statement then
// runs as text, and reports its own errors).
func (s *Stmts) stmt(query string) *sql.Stmt {
	if s == nil {
		return nil
	}
	s.run.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byText != nil {
		s.byText[query]++
	}
	if !s.prepare {
		return nil
	}
	st, ok := s.cached[query]
	if ok || len(s.cached) >= maxCached {
		return st
	}
	// Prepared apart from the transaction that asks, which holds a
	// connection (the write pool's only one); nil marks it under way.
	s.cached[query] = nil
	go s.add(query)
	return nil
}

// add prepares query on a connection of the pool; a transaction on
// another connection prepares it there once (Tx.StmtContext). A failure
// leaves it to run as text.
func (s *Stmts) add(query string) {
	st, err := s.db.Prepare(query)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		return
	}
	if s.closed {
		_ = st.Close()
		return
	}
	s.cached[query] = st
}
