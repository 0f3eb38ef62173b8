package sqlstore

import "drover/internal/store"

// ForgeOAuth is the table of forges' sign-in applications (internal/signin).
var ForgeOAuth = Table{"forge_oauth", []string{"forge", "client_id", "secret", "updated_by", "updated_at"}}

var (
	forgeOAuth    = newTable(ForgeOAuth)
	putForgeOAuth = forgeOAuth.upsert()
)

func scanForgeOAuth(s Scanner) (o store.ForgeOAuth, err error) {
	err = s.Scan(&o.Forge, &o.ClientID, &o.Secret, &o.UpdatedBy, TimeCol{&o.UpdatedAt})
	return o, err
}

func (t *tx) PutForgeOAuth(o store.ForgeOAuth) error {
	_, err := t.exec("put the sign-in of forge "+o.Forge, putForgeOAuth,
		o.Forge, o.ClientID, o.Secret, o.UpdatedBy, Millis(o.UpdatedAt))
	return err
}

func (t *tx) ForgeOAuth(forge string) (store.ForgeOAuth, error) {
	return one(t, "sign-in of forge "+forge, scanForgeOAuth, forgeOAuth.query("WHERE forge = ?"), forge)
}

func (t *tx) ForgeOAuths() ([]store.ForgeOAuth, error) {
	return all(t, "forges' sign-ins", scanForgeOAuth, forgeOAuth.query("ORDER BY forge"))
}

func (t *tx) RemoveForgeOAuth(forge string) error {
	what := "remove the sign-in of forge " + forge
	res, err := t.exec(what, `DELETE FROM forge_oauth WHERE forge = ?`, forge)
	if err != nil {
		return err
	}
	return affected(what, res)
}
