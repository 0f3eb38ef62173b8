package sqlstore

// Access versions (store.Tx.AccessVersion). A runner's access_seq is the
// access version of the last write that changed what its access is made
// of; a write stamps a runner with one more than the greatest stamp. Two
// writers that would stamp the same version each read the greatest stamp
// the other changes, so only one commits (SQLite serializes writes;
// Postgres's serializable writes fail one, which runs again): versions
// become visible in order, and a reader that sees one sees all below it.

// nextAccessSeq is the version a stamp writes.
const nextAccessSeq = "(SELECT COALESCE(MAX(access_seq), 0) + 1 FROM runners)"

// runnerUpdate is the runners update that also stamps the runner with the
// next access version when its owner, name or access changes, and with the
// next token version when its token is replaced or revoked (the SET's own
// columns are the old row's; the five new values follow the set values,
// see UpdateRunner).
var runnerUpdate = runners.updateSetting(
	"access_seq = CASE WHEN owner_id <> ? OR name <> ? OR access <> ? THEN " + nextAccessSeq + " ELSE access_seq END, " +
		"token_seq = CASE WHEN token_hash <> ? OR (revoked_at IS NOT NULL) <> ? THEN " + nextTokenSeq + " ELSE token_seq END")

// Token versions (store.Tx.TokenVersion) are stamped as access versions
// are, in a column of their own: a token changes rarely, and a hub checks
// its connections against the runners stamped since its last look.
const nextTokenSeq = "(SELECT COALESCE(MAX(token_seq), 0) + 1 FROM runners)"

func (t *tx) TokenVersion() (int64, error) {
	return one(t, "token version", Value[int64], "SELECT COALESCE(MAX(token_seq), 0) FROM runners")
}

func (t *tx) TokensChangedSince(v int64) (map[string]string, error) {
	return stringMap(t, "runner tokens changed since version",
		"SELECT id, CASE WHEN revoked_at IS NULL THEN token_hash ELSE '' END FROM runners WHERE token_seq > ?", v)
}

// stampAccess gives the runners matching where (a condition on runners)
// the next access version.
func (t *tx) stampAccess(what, where string, args ...any) error {
	_, err := t.exec("stamp the access of "+what, "UPDATE runners SET access_seq = "+nextAccessSeq+" WHERE "+where, args...)
	return err
}

func (t *tx) AccessVersion() (int64, error) {
	return one(t, "access version", Value[int64], "SELECT COALESCE(MAX(access_seq), 0) FROM runners")
}

func (t *tx) AccessChangedSince(v int64) ([]string, error) {
	return all(t, "runners whose access changed since version", Value[string],
		"SELECT id FROM runners WHERE access_seq > ? ORDER BY id", v)
}
