package sqlstore

import "drover/internal/store"

// The tables of sign-in with an OpenID Connect provider (internal/signin).
var (
	OIDCProviders = Table{"oidc_providers", []string{"name", "issuer", "client_id", "secret", "updated_by", "updated_at"}}
	OIDCLinks     = Table{"oidc_links", []string{"id", "provider", "subject", "user_id", "created_by", "created_at"}}
)

var (
	oidcProviders   = newTable(OIDCProviders)
	putOIDCProvider = oidcProviders.upsert()
	oidcLinks       = newTable(OIDCLinks)
)

func scanOIDCProvider(s Scanner) (p store.OIDCProvider, err error) {
	err = s.Scan(&p.Name, &p.Issuer, &p.ClientID, &p.Secret, &p.UpdatedBy, TimeCol{&p.UpdatedAt})
	return p, err
}

func (t *tx) PutOIDCProvider(p store.OIDCProvider) error {
	_, err := t.exec("put OIDC provider "+p.Name, putOIDCProvider,
		p.Name, p.Issuer, p.ClientID, p.Secret, p.UpdatedBy, Millis(p.UpdatedAt))
	return err
}

func (t *tx) OIDCProvider(name string) (store.OIDCProvider, error) {
	return one(t, "OIDC provider "+name, scanOIDCProvider, oidcProviders.query("WHERE name = ?"), name)
}

func (t *tx) OIDCProviders() ([]store.OIDCProvider, error) {
	return all(t, "OIDC providers", scanOIDCProvider, oidcProviders.query("ORDER BY name"))
}

func (t *tx) RemoveOIDCProvider(name string) error {
	what := "remove OIDC provider " + name
	res, err := t.exec(what, `DELETE FROM oidc_providers WHERE name = ?`, name)
	if err != nil {
		return err
	}
	return affected(what, res)
}

// A link's key is pairKey(provider, subject): a provider's name holds no
// space, so the first space ends it.
func scanOIDCLink(s Scanner) (l store.OIDCLink, err error) {
	var id string
	err = s.Scan(&id, &l.Provider, &l.Subject, &l.UserID, &l.CreatedBy, TimeCol{&l.CreatedAt})
	return l, err
}

func (t *tx) PutOIDCLink(l store.OIDCLink) error {
	return t.insert(oidcLinks, "OIDC link "+l.Provider+" "+l.Subject,
		[]any{pairKey(l.Provider, l.Subject), l.Provider, l.Subject, l.UserID, l.CreatedBy, Millis(l.CreatedAt)})
}

func (t *tx) OIDCLink(provider, subject string) (store.OIDCLink, error) {
	return one(t, "OIDC link "+provider+" "+subject, scanOIDCLink, oidcLinks.query("WHERE id = ?"), pairKey(provider, subject))
}

func (t *tx) OIDCLinksOf(userID string) ([]store.OIDCLink, error) {
	return all(t, "OIDC links of user "+userID, scanOIDCLink,
		oidcLinks.query("WHERE user_id = ? ORDER BY provider, subject"), userID)
}

func (t *tx) RemoveOIDCLink(provider, subject string) error {
	what := "remove OIDC link " + provider + " " + subject
	res, err := t.exec(what, `DELETE FROM oidc_links WHERE id = ?`, pairKey(provider, subject))
	if err != nil {
		return err
	}
	return affected(what, res)
}
